import type { Logger } from '@nestjs/common';
import { Observable } from 'rxjs';

/**
 * An `@EventPattern()` handler's call, kept running when its subscriber leaves before the
 * handler was handed the call (`started()` false). Nest joins the handlers of one event with
 * `forkJoin`, which unsubscribes the others as soon as one fails or ends without a value; a
 * claim still in flight would then be cancelled and its handler never run, while the event is
 * settled for the others. Without the library each handler starts at once, so it is not lost
 * that way. Once started, leaving unsubscribes as it would without the library (an app's
 * `timeout()` cancels a handler's Observable). What fails once nobody listens is logged, as
 * Nest logs an event handler's error.
 */
export function runsToEnd<T>(
  source: Observable<T>,
  name: string,
  started: () => boolean,
  logger: Logger,
): Observable<T> {
  return new Observable<T>((subscriber) => {
    let attached = true;
    const inner = source.subscribe({
      next: (value) => {
        if (attached) subscriber.next(value);
      },
      error: (err: unknown) => {
        if (attached) return subscriber.error(err);
        logger.error(`${name} failed after its event's other handlers ended: ${String(err)}`);
      },
      complete: () => {
        if (attached) subscriber.complete();
      },
    });
    return () => {
      attached = false;
      if (started()) inner.unsubscribe();
    };
  });
}
