import type { CallHandler } from '@nestjs/common';
import { catchError, concatMap, defer, finalize, from, mergeMap, type Observable } from 'rxjs';
import { reduce, throwError } from 'rxjs';
import {
  attachIdempotencyContext,
  IdempotencyContext,
} from '../../execution/idempotency-context.js';
import type { IdempotencyTransaction } from '../../interfaces/idempotency-store.interface.js';

/**
 * A transactional resolver or RPC handler called without a key (its route is not `required`):
 * nothing is deduplicated, but the handler still writes through `idem.manager`, in a plain
 * transaction committed when it returns and rolled back when it throws. Its context has the key
 * `''` and records nothing.
 */
export function keylessTransaction(
  carrier: object,
  endpoint: string,
  open: () => IdempotencyTransaction,
  next: CallHandler,
): Observable<unknown> {
  return defer(() => {
    const transaction = open();
    const context = new IdempotencyContext<unknown>({ key: '', endpoint, userId: '' });
    context.manager = transaction.manager;
    attachIdempotencyContext(carrier, context);
    let ended = false;
    const end = (commit: boolean) => {
      ended = true;
      return commit ? transaction.commit() : transaction.rollback();
    };
    return next.handle().pipe(
      reduce((_, value) => value, undefined as unknown),
      concatMap(async (value) => {
        await end(true);
        return value;
      }),
      catchError((error: unknown) =>
        from(ended ? Promise.resolve() : end(false)).pipe(mergeMap(() => throwError(() => error))),
      ),
      finalize(() => {
        if (!ended) void end(false);
      }),
    );
  });
}
