import {
  checkSection,
  flag,
  fn,
  nonEmptyString,
  oneOf,
  type Rules,
} from '../idempotency-options.check.js';
import type { IdempotentOptions } from '../interfaces/idempotent-options.interface.js';
import { characters, MAX_ENDPOINT_LENGTH } from '../request/scope-endpoint.js';

// A ttlSeconds of 0 or less writes a record that is already expired: every retry runs again.
const positiveSeconds = (v: unknown) =>
  typeof v === 'number' && Number.isFinite(v) && v > 0 ? undefined : 'a positive number';

const ROUTE_OPTION_RULES: Rules<IdempotentOptions> = {
  ttlSeconds: positiveSeconds,
  required: flag,
  // Stored as given: a longer name would make PostgreSQL refuse every claim (a 503 per request).
  endpoint: (v) =>
    nonEmptyString(v) ??
    (characters(v as string) > MAX_ENDPOINT_LENGTH
      ? `at most ${MAX_ENDPOINT_LENGTH} characters long (the width of the endpoint column)`
      : undefined),
  transactionId: fn,
  transactional: oneOf(true, false, 'single'),
  // Checked by the decorator itself, with its own message.
  storeResponse: () => undefined,
};

const PREFIX = 'nestjs-pg-idempotency: ';

/** The module's strict start-up for `@Idempotent()`'s own options, when the controller loads. */
export function checkIdempotentOptions(options: IdempotentOptions): void {
  if (typeof options !== 'object' || options === null) return;
  try {
    checkSection('', options, ROUTE_OPTION_RULES);
  } catch (err) {
    const message = (err as Error).message.replace(PREFIX, '');
    throw new Error(`${PREFIX}@Idempotent(): ${message}`, { cause: err });
  }
}
