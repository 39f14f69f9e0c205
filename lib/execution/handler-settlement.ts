import { Observable } from 'rxjs';

export interface SettlementHooks {
  /**
   * The handler's observable completed (`errored` false) or errored, after `emitted` values or
   * none; `last` is the last value it emitted.
   */
  settled(error: unknown, errored: boolean, emitted: boolean, last: unknown): void;
  /** The caller stopped listening before the handler settled; true keeps the handler observed. */
  detached(): boolean;
}

/**
 * Mirrors the handler's observable, but can keep observing it after the caller stops listening
 * before it settles (a timeout interceptor answers 408/504 while the handler still runs): the
 * claim must last as long as the handler, not as long as the response.
 */
export function trackSettlement<T>(source: Observable<T>, hooks: SettlementHooks): Observable<T> {
  return new Observable<T>((subscriber) => {
    let settled = false;
    let emitted = false;
    let last: unknown;
    const subscription = source.subscribe({
      next: (value) => {
        emitted = true;
        last = value;
        subscriber.next(value);
      },
      error: (error: unknown) => {
        settled = true;
        hooks.settled(error, true, emitted, last);
        subscriber.error(error);
      },
      complete: () => {
        settled = true;
        hooks.settled(undefined, false, emitted, last);
        subscriber.complete();
      },
    });
    return () => {
      if (!settled && !hooks.detached()) subscription.unsubscribe();
    };
  });
}
