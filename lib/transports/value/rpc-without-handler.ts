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
import { handlerName } from './handler-name.js';
import { isEventHandler } from '../../execution/idempotent-route.resolver.js';

type Hook = (event: RpcWithoutHandlerEvent) => void | Promise<void>;

/** The problem code an `RpcException` of the library carries. */
function codeOf(err: unknown): string | undefined {
  const error = (err as { getError?: () => unknown } | null)?.getError?.();
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Whether the call expects a reply: RabbitMQ's message says (a `client.emit()` to a
 * `@MessagePattern()` handler has no `replyTo`, and nobody retries it); else the handler's kind.
 */
function callKind(context: ExecutionContext): RpcWithoutHandlerEvent['kind'] {
  const rpc = context.switchToRpc().getContext<{ getMessage?: () => unknown } | undefined>();
  const message = rpc?.getMessage?.() as { properties?: { replyTo?: unknown } } | undefined;
  if (message?.properties) return message.properties.replyTo ? 'message' : 'event';
  return isEventHandler(context.getHandler()) ? 'event' : 'message';
}

/** `next`, and whether this attempt handed the call to its handler. */
export function watchHandler(next: CallHandler): { next: CallHandler; ran: () => boolean } {
  let ran = false;
  const watched = {
    handle: () => {
      ran = true;
      return next.handle();
    },
  };
  return { next: watched, ran: () => ran };
}

/**
 * Calls `hook` once, before the attempt's first answer goes back, when the attempt never handed
 * the call to its handler (`ran()` still false then): a replay, or a refusal. A manual-ack
 * consumer settles the message there. Each attempt is reported on its own (an app's `retry()`
 * makes several of one message, and a handler that failed may not have settled it).
 */
export function reportWithoutHandler<T>(
  call: Observable<T>,
  context: ExecutionContext,
  hook: Hook,
  ran: () => boolean,
  logger: Logger,
): Observable<T> {
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
  const event = (outcome: RpcWithoutHandlerEvent['outcome'], error?: unknown) => {
    const rpc = context.switchToRpc();
    return {
      data: rpc.getData(),
      context: rpc.getContext(),
      handler: handlerName(context),
      kind: callKind(context),
      outcome,
      ...(outcome === 'refused' ? { code: codeOf(error) } : {}),
    };
  };
  return call.pipe(
    materialize(),
    concatMap((n: ObservableNotification<T>) => {
      if (reported || ran()) return of(n);
      reported = true;
      const refusal = n.kind === 'E' ? event('refused', n.error) : event('replayed');
      return report(refusal).pipe(map(() => n));
    }),
    dematerialize(),
  );
}
