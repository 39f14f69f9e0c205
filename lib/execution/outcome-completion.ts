import { createHash } from 'node:crypto';
import { ProblemCode } from '../idempotency.constants.js';
import { IdempotencyProblemException, PROBLEM_CONTENT_TYPE } from '../idempotency.problems.js';
import type { Completion } from '../interfaces/idempotency-store.interface.js';
import type { WireResponse } from './handler-outcome.js';
import { jsonBody } from './json-body.js';

export type Completing = Omit<Completion, 'ttlSeconds'>;

/**
 * What is stored of an outcome: all of it when it fits `maxResponseBytes`, only its status and
 * SHA-256 on a `storeResponse: 'digest'` route. `body()` is what `transactionId()` derives from:
 * the parsed JSON when it is JSON (stored or not), else the text; parsed only when asked.
 */
export function completionOf(
  wire: WireResponse,
  storeResponse: 'full' | 'digest',
  maxResponseBytes: number,
): { completing: Omit<Completing, 'transactionId'>; storable: boolean; body: () => unknown } {
  const digestOnly = storeResponse === 'digest';
  const storable = !digestOnly && wire.body.length <= maxResponseBytes;
  // Also a body too large to store: the client got it, and its id belongs in the record.
  const body = () => {
    const json = jsonBody(wire);
    return json ? json.value : wire.body.toString('utf8');
  };
  return {
    storable,
    body,
    completing: {
      statusCode: wire.statusCode,
      headers: wire.headers,
      body: storable ? wire.body : null,
      bodyDigest: digestOnly ? createHash('sha256').update(wire.body).digest('hex') : null,
    },
  };
}

/** Sent instead of the outcome when a transactional handler's writes were rolled back. */
export function rolledBackResponse(retryAfterSeconds: number, detail?: string): WireResponse {
  const problem = new IdempotencyProblemException(503, ProblemCode.StoreUnavailable, {
    detail:
      detail ??
      'The operation was rolled back because its outcome could not be recorded; retry with the same key',
  });
  return {
    statusCode: 503,
    headers: { 'content-type': PROBLEM_CONTENT_TYPE, 'retry-after': String(retryAfterSeconds) },
    body: Buffer.from(JSON.stringify(problem.getResponse())),
  };
}

/**
 * Sent instead of the outcome when the COMMIT of a transactional outcome got no answer: it may
 * have committed, or not, and only a retry with the same key can tell (it replays, or runs).
 */
export function unknownOutcomeResponse(retryAfterSeconds: number): WireResponse {
  const response = rolledBackResponse(retryAfterSeconds);
  const problem = {
    ...(JSON.parse(response.body.toString('utf8')) as object),
    detail:
      'The outcome of the operation is unknown: the database did not confirm its commit in time. Retry with the same key: it replays the outcome if it was committed, or runs the operation if not. Never retry with a new key',
    outcome: 'unknown',
  };
  return { ...response, body: Buffer.from(JSON.stringify(problem)) };
}
