import type { Logger } from '@nestjs/common';
import { Observable } from 'rxjs';

/**
 * A microservice call, kept running when its subscriber leaves before the handler was handed the
 * call (`started()` false). Without the library a handler starts at once; with it, the key is
 * checked first, and an app's `timeout()` firing meanwhile, or Nest's `forkJoin` of one event's
 * handlers unsubscribing the others when one fails or ends without a value, would cancel the
 * claim: the handler would never run, while the message is settled (an event sent to a
 * `@MessagePattern()` handler too). Decided, it runs; its caller, if any, retries with the same
 * key and is answered from the record. Once started, leaving unsubscribes as it would without the
 * library (an app's `timeout()` cancels a handler's Observable). What fails once nobody listens
 * is logged, as Nest logs an event handler's error.
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
        logger.error(`${name} failed after its caller left: ${String(err)}`);
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
