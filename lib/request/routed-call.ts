import { Observable, type Subscription } from 'rxjs';
import type { ActiveCalls } from './active-calls.js';

/** Where a call was routed once its key was decided on, and how to free a claim never used. */
export interface RoutedCall {
  result: Observable<unknown>;
  cancel?: () => Promise<void>;
}

/**
 * The call's result once `decide` has routed it. A caller that gives up while the claim is in
 * flight (a timeout interceptor) never leaves the key claimed: its claim is cancelled. `call` is
 * marked in `active` from subscription until the result ends, before the end is passed on (an
 * app's `retry()` may subscribe again from inside it).
 */
export function afterDecision(
  decide: () => Promise<RoutedCall>,
  active: ActiveCalls,
  call: object,
): Observable<unknown> {
  return new Observable((subscriber) => {
    let closed = false;
    let inner: Subscription | undefined;
    const end = active.begin(call);
    decide().then(
      (routed) => {
        if (closed) return void routed.cancel?.();
        inner = routed.result.subscribe({
          next: (value) => subscriber.next(value),
          error: (err: unknown) => {
            end();
            subscriber.error(err);
          },
          complete: () => {
            end();
            subscriber.complete();
          },
        });
      },
      (err: unknown) => {
        end();
        subscriber.error(err);
      },
    );
    return () => {
      closed = true;
      end();
      inner?.unsubscribe();
    };
  });
}
