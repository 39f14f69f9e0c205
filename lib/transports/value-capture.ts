import { catchError, concatMap, from, mergeMap, reduce, throwError } from 'rxjs';
import type { OutcomeCapture, WireResponse } from '../execution/handler-outcome.js';
import { canonicalJson } from '../execution/request-fingerprint.js';
import type { StoredResponse } from '../store/idempotency-store.interface.js';

/**
 * A resolver's or RPC handler's result, as stored: its canonical JSON (keys sorted, `toJSON()`
 * applied, `undefined` as `null`). There are no bytes on a wire to keep identical, so a replay
 * returns the parsed JSON: a `Date` comes back as its ISO string.
 */
export function encodeValue(value: unknown): WireResponse {
  return {
    statusCode: 200,
    headers: { 'content-type': 'application/json' },
    body: Buffer.from(canonicalJson(value), 'utf8'),
  };
}

export function decodeValue(stored: StoredResponse & { body: Buffer }): unknown {
  return JSON.parse(stored.body.toString('utf8'));
}

/**
 * Captures the last value the handler emits, stores it before the caller sees it, then passes
 * it on. A handler that throws stores nothing and frees the key: its error goes to the caller.
 * `unrecorded` is the error sent when the outcome could not be recorded (a rolled-back
 * transaction): the caller must not believe an operation happened that was undone.
 */
export function captureValue(unrecorded: () => Promise<Error>): OutcomeCapture {
  return (handled, hooks) =>
    handled.pipe(
      catchError((error: unknown) =>
        from(hooks.onFailure(error)).pipe(mergeMap(() => throwError(() => error))),
      ),
      reduce((_, value) => value, undefined as unknown),
      concatMap(async (value) => {
        const replacement = await hooks.onEnd(encodeValue(value));
        if (replacement) throw await unrecorded();
        return value;
      }),
    );
}
