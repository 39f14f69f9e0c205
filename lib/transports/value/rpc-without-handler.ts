import type { CallHandler, ExecutionContext, Logger } from '@nestjs/common';
import {
  concatMap,
  dematerialize,
  from,
  map,
  materialize,
  type Observable,
  type ObservableNotification,
  of,
} from 'rxjs';
import type { RpcWithoutHandlerEvent } from '../../interfaces/idempotency-module-options.interface.js';

type Hook = (event: RpcWithoutHandlerEvent) => void | Promise<void>;

/** The problem code an `RpcException` of the library carries. */
function codeOf(err: unknown): string | undefined {
  const error = (err as { getError?: () => unknown } | null)?.getError?.();
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * The calls (`context.getArgs()`, the same array each time an app's `retry()` enters the
 * interceptors again) whose handler was invoked: a later attempt answered without it is not
 * reported, since the handler already had the message.
 */
const handled = new WeakSet<object>();

/** `next`, noting the call's handler as invoked when the library hands the call to it. */
export function watchHandler(context: ExecutionContext, next: CallHandler): CallHandler {
  const args = context.getArgs();
  return {
    handle: () => {
      handled.add(args);
      return next.handle();
    },
  };
}

/**
 * Calls `hook` once, before the call's first answer goes back, when the call's handler was never
 * invoked, in this attempt or an earlier one: a replay, or a refusal. A manual-ack consumer
 * settles the message there, since the handler that would have acked it did not run.
 */
export function reportWithoutHandler<T>(
  call: Observable<T>,
  context: ExecutionContext,
  hook: Hook,
  logger: Logger,
): Observable<T> {
  const args = context.getArgs();
  let reported = false;
  const report = (event: RpcWithoutHandlerEvent) =>
    from(
      (async () => {
        try {
          await hook(event);
        } catch (err) {
          logger.error(`onRpcWithoutHandler threw: ${(err as Error)?.message ?? String(err)}`);
        }
      })(),
    );
  return call.pipe(
    materialize(),
    concatMap((n: ObservableNotification<T>) => {
      if (reported || handled.has(args)) return of(n);
      reported = true;
      const rpc = context.switchToRpc();
      const refused = n.kind === 'E';
      return report({
        data: rpc.getData(),
        context: rpc.getContext(),
        handler: `${context.getClass().name}.${context.getHandler().name}`,
        outcome: refused ? 'refused' : 'replayed',
        ...(refused ? { code: codeOf(n.error) } : {}),
      }).pipe(map(() => n));
    }),
    dematerialize(),
  );
}
