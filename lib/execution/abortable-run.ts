import { ServiceUnavailableException } from '@nestjs/common';
import { Observable } from 'rxjs';

/**
 * `handled`, erroring with a 503 as soon as `aborted` settles (the store ended a single-commit
 * transaction on its own), unless the handler spoke first: the 503 need not wait for the handler.
 * `onAbort` learns the reason either way, before any outcome is recorded.
 */
export function abortableRun(
  handled: Observable<unknown>,
  aborted: Promise<Error> | undefined,
  onAbort: (reason: Error) => void,
): Observable<unknown> {
  if (!aborted) return handled;
  // rxjs's race, without a second observable per request: whichever speaks first wins.
  return new Observable((subscriber) => {
    let won = false;
    const subscription = handled.subscribe({
      next: (value) => {
        won = true;
        subscriber.next(value);
      },
      error: (err: unknown) => {
        won = true;
        subscriber.error(err);
      },
      complete: () => {
        won = true;
        subscriber.complete();
      },
    });
    void aborted.then((reason) => {
      onAbort(reason);
      if (won || subscriber.closed) return;
      subscription.unsubscribe();
      subscriber.error(new ServiceUnavailableException(reason.message));
    });
    return subscription;
  });
}
