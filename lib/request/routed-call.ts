import { Observable, Subscriber, type Subscription } from 'rxjs';
import type { ActiveCalls, CallMark } from './active-calls.js';

/** Where a call was routed once its key was decided on, and how to free a claim never used. */
export interface RoutedCall {
  result: Observable<unknown>;
  cancel?: () => Promise<void>;
}

/**
 * Passes the result on, ending the mark first: an app's `retry()` may subscribe again from inside.
 * A `Subscriber` itself, so rxjs adds no wrapper of its own around it.
 */
class Ending extends Subscriber<unknown> {
  constructor(
    destination: Subscriber<unknown>,
    private readonly mark: CallMark<unknown>,
  ) {
    super(destination);
  }
  protected override _error(err: unknown): void {
    this.mark.active = false;
    super._error(err);
  }
  protected override _complete(): void {
    this.mark.active = false;
    super._complete();
  }
}

/**
 * The call's result once `decide` has routed it. A caller that gives up while the claim is in
 * flight (a timeout interceptor) never leaves the key claimed: its claim is cancelled. `call`
 * is marked active in `calls` from subscription until the result ends.
 */
export function afterDecision<R>(
  decide: (mark: CallMark<R>) => Promise<RoutedCall>,
  calls: ActiveCalls<R>,
  call: object,
): Observable<unknown> {
  return new Observable((subscriber) => {
    let closed = false;
    let inner: Subscription | undefined;
    const mark = calls.begin(call);
    decide(mark).then(
      (routed) => {
        if (closed) return void routed.cancel?.();
        inner = routed.result.subscribe(new Ending(subscriber, mark));
      },
      (err: unknown) => {
        mark.active = false;
        subscriber.error(err);
      },
    );
    return () => {
      closed = true;
      mark.active = false;
      inner?.unsubscribe();
    };
  });
}
