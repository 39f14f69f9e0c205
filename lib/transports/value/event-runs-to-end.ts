import type { Logger } from '@nestjs/common';
import { Observable } from 'rxjs';

/**
 * An `@EventPattern()` handler's call, kept running when its subscriber leaves. Nest joins the
 * handlers of one event with `forkJoin`, which unsubscribes the others as soon as one fails or
 * ends without a value; a claim still in flight would then be cancelled and its handler never
 * run, while the event is settled for the others. Without the library those handlers run to
 * their end (a started Promise is not cancelled); so do they with it. What fails once nobody
 * listens is logged, as Nest logs an event handler's error.
 */
export function runsToEnd<T>(source: Observable<T>, name: string, logger: Logger): Observable<T> {
  return new Observable<T>((subscriber) => {
    let attached = true;
    source.subscribe({
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
    };
  });
}
