import { describe, expect, it } from '@jest/globals';
import { Idempotent } from '../../lib/index.js';
import type { IdempotentOptions } from '../../lib/interfaces/idempotent-options.interface.js';

/**
 * `@Idempotent()`'s own options are checked when the controller loads, like the module's: a
 * `ttlSeconds` of 0 or less made every retry a second run of the handler (its record was expired
 * when written), NaN made every keyed request a 503, and a misspelt key (`requried`) was ignored.
 */
describe('@Idempotent() options', () => {
  it.each<[object, string]>([
    [{ ttlSeconds: -5 }, 'ttlSeconds must be a positive number, got -5'],
    [{ ttlSeconds: 0 }, 'ttlSeconds must be a positive number, got 0'],
    [{ ttlSeconds: Number.NaN }, 'ttlSeconds must be a positive number, got NaN'],
    [{ ttlSeconds: '60' }, 'ttlSeconds must be a positive number, got string "60"'],
    [{ requried: true }, "unknown option 'requried' (did you mean 'required'?)"],
    [{ ttlSecond: 60 }, "unknown option 'ttlSecond' (did you mean 'ttlSeconds'?)"],
    [{ required: 'yes' }, 'required must be true or false, got string "yes"'],
    [{ transactional: 'Single' }, 'transactional must be one of true, false, "single"'],
    [{ endpoint: '' }, 'endpoint must be a non-empty string'],
    [
      { endpoint: 'e'.repeat(256) },
      `endpoint must be at most 255 characters long (the width of the endpoint column), got string "${'e'.repeat(256)}"`,
    ],
    [{ transactionId: 'id' }, 'transactionId must be a function'],
  ])('refuses %j when the controller loads, naming the option', (options, message) => {
    expect(() => Idempotent(options as IdempotentOptions)).toThrow(
      `nestjs-pg-idempotency: @Idempotent(): ${message}`,
    );
  });

  it.each<IdempotentOptions>([
    {},
    { ttlSeconds: 0.5, required: true, endpoint: 'charge', transactionId: () => 'x' },
    { transactional: 'single', storeResponse: 'digest' },
    { transactional: false, ttlSeconds: undefined },
    { endpoint: 'e'.repeat(255) },
  ])('accepts %j', (options) => {
    expect(() => Idempotent(options)).not.toThrow();
  });
});
