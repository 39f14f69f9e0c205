import { Observable, type Subscription } from 'rxjs';

/** Where a call was routed once its key was decided on, and how to free a claim never used. */
export interface RoutedCall {
  result: Observable<unknown>;
  cancel?: () => Promise<void>;
}

/**
 * The call's result once `decide` has routed it. A caller that gives up while the claim is in
 * flight (a timeout interceptor) never leaves the key claimed: its claim is cancelled.
 */
export function afterDecision(decide: () => Promise<RoutedCall>): Observable<unknown> {
  return new Observable((subscriber) => {
    let closed = false;
    let inner: Subscription | undefined;
    decide().then(
      (routed) => {
        if (closed) return void routed.cancel?.();
        inner = routed.result.subscribe(subscriber);
      },
      (err: unknown) => subscriber.error(err),
    );
    return () => {
      closed = true;
      inner?.unsubscribe();
    };
  });
}
