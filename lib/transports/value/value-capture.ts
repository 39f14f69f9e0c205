import { concat, concatMap, from, Observable, throwError } from 'rxjs';
import {
  type OutcomeCapture,
  uncapturable,
  type WireResponse,
} from '../../execution/handler-outcome.js';
import { canonicalJson } from '../../execution/request-fingerprint.js';
import { isRecoveryPointFailure } from '../../recovery/recovery-point.error.js';
import { EncodeBudget, plainJson } from './json-value.js';

/** A value's stored form: JSON text, as if it had been an HTTP 200 JSON response. */
export function jsonWire(json: string): WireResponse {
  return {
    statusCode: 200,
    headers: { 'content-type': 'application/json' },
    body: Buffer.from(json, 'utf8'),
  };
}

/**
 * An RPC handler's result, as stored: its canonical JSON (keys sorted, `toJSON()` applied,
 * `undefined` as `null`). There are no bytes on a wire to keep identical, so a replay returns
 * the parsed JSON: a `Date` comes back as its ISO string. A value JSON cannot hold (a `BigInt`,
 * a cycle) or larger than `maxBytes` throws `UnencodableValueError`, without walking past it.
 */
export function encodeValue(value: unknown, maxBytes: number): WireResponse {
  return jsonWire(canonicalJson(plainJson(value, new EncodeBudget(maxBytes))));
}

/**
 * An RPC handler that answered nothing, as stored: no body, which no encoded value has. Its
 * caller got no value (Nest's transports drop an `undefined` response); its replay emits what
 * the handler's stream did, so an app interceptor outside `@Idempotent()` sees the same again:
 * nothing for `EMPTY` (status 200, as stored before the two were told apart), one `undefined`
 * for a `Promise<void>` (204). Not a `null`: that would be a value.
 */
export const NO_VALUE: WireResponse = { statusCode: 200, headers: {}, body: Buffer.alloc(0) };
export const UNDEFINED_VALUE: WireResponse = { ...NO_VALUE, statusCode: 204 };

/** Whether a stored response is `NO_VALUE` or `UNDEFINED_VALUE`. */
export const isNoValue = (wire: { body: Buffer | null }) => wire.body?.length === 0;

const answersNothing = (values: unknown[]) =>
  values.length === 0 || (values.length === 1 && values[0] === undefined);

export function decodeValue(body: Buffer): unknown {
  return JSON.parse(body.toString('utf8'));
}

/** What a handler's stream did: its values, and its error if it failed. */
interface Ended {
  values: unknown[];
  failure?: { error: unknown };
}

/** The handler's stream, collected: one `Ended` when it completes or fails. */
const ended = (handled: Observable<unknown>) =>
  new Observable<Ended>((subscriber) => {
    const values: unknown[] = [];
    return handled.subscribe({
      next: (value) => values.push(value),
      error: (error: unknown) => {
        subscriber.next({ values, failure: { error } });
        subscriber.complete();
      },
      complete: () => {
        subscriber.next({ values });
        subscriber.complete();
      },
    });
  });

/**
 * Captures the value the handler emits, stores it before the caller sees it, then passes it on.
 * Where the transport `streams` (RPC), a handler emitting several values gets them all to the
 * caller, and its key is completed without a response, as an HTTP stream's is; GraphQL keeps the
 * last value; an RPC handler that answers nothing is stored as `NO_VALUE`. A handler that throws
 * stores nothing and frees the key: its error goes to the caller. An RPC handler whose stream
 * fails after emitting values acted (its caller would have had them: `firstValueFrom` resolves
 * with the first): its key is completed without a response, and the caller gets the values, then
 * the error. `unrecorded` is the error sent when the outcome could not be recorded (a rolled-back
 * transaction): the caller must not believe an operation happened that was undone. A value that
 * cannot be encoded still reaches the caller; its key is completed without a response.
 */
export function captureValue(
  encode: (value: unknown) => WireResponse,
  unrecorded: () => Promise<Error>,
  streams: boolean,
): OutcomeCapture {
  return (handled, hooks) =>
    ended(handled).pipe(
      // GraphQL answers with the last value only: that one is the outcome, as before.
      concatMap(async ({ values: emitted, failure }): Promise<Ended> => {
        // A recovery point that failed keeps the key for a resumed run, values sent or not.
        const acted = streams && emitted.length > 0 && !isRecoveryPointFailure(failure?.error);
        if (failure && !acted) {
          const kept = await hooks.onFailure(failure.error);
          throw kept === 'kept' ? await unrecorded() : failure.error;
        }
        const values = streams ? emitted : emitted.slice(-1);
        if (failure) {
          // Stored as the values were sent: a stream, 200 (what `storeIf` sees, with the error).
          if (await uncapturable(hooks, 200, 'streamed')) throw await unrecorded();
          return { values, failure };
        }
        if (streams && answersNothing(values)) {
          const nothing = values.length === 0 ? NO_VALUE : UNDEFINED_VALUE;
          if (await hooks.onEnd(nothing)) throw await unrecorded();
          return { values };
        }
        // Several values are a stream: all reach the caller, none can be replayed as one.
        if (values.length > 1) {
          if (await uncapturable(hooks, 200, 'streamed')) throw await unrecorded();
          return { values };
        }
        const [value] = values;
        let wire: WireResponse;
        try {
          wire = encode(value);
        } catch {
          // Whatever throws while the value is read (a toJSON, a getter, a Proxy): the handler
          // ran, so its run is recorded without a body, never left unsettled.
          if (await uncapturable(hooks, 200, 'unencodable')) throw await unrecorded();
          return { values: [value] };
        }
        const replacement = await hooks.onEnd(wire);
        if (replacement) throw await unrecorded();
        return { values: [value] };
      }),
      concatMap(({ values, failure }) =>
        failure
          ? concat(
              from(values),
              throwError(() => failure.error),
            )
          : from(values),
      ),
    );
}
