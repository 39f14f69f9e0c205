import { describe, expect, it } from '@jest/globals';
import type { ExecutionContext, Logger } from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import { firstValueFrom, of, throwError, toArray } from 'rxjs';
import type { RpcWithoutHandlerEvent } from '../../lib/index.js';
import {
  reportWithoutHandler,
  watchHandler,
} from '../../lib/transports/value/rpc-without-handler.js';

class BillingHandler {
  onOrder() {}
}

/** A call's context: the same `args` array each time it enters the interceptors. */
function rpcContext(): ExecutionContext {
  const args = [{ amount: 5 }, 'ctx'];
  return {
    getArgs: () => args,
    getClass: () => BillingHandler,
    getHandler: () => BillingHandler.prototype.onOrder,
    switchToRpc: () => ({ getData: () => args[0], getContext: () => args[1] }),
  } as unknown as ExecutionContext;
}

function logger() {
  const errors: string[] = [];
  return { errors, logger: { error: (m: string) => errors.push(m) } as unknown as Logger };
}

const inProgress = () => new RpcException({ code: 'request_in_progress', status: 409 });

describe('reportWithoutHandler', () => {
  it('reports a replay once, naming the handler, and awaits the hook before the value', async () => {
    const order: string[] = [];
    const hook = async (e: RpcWithoutHandlerEvent) => {
      await new Promise((r) => setTimeout(r, 10));
      order.push(`hook ${e.outcome} ${e.handler} ${e.data.amount} ${e.context}`);
    };
    const call = reportWithoutHandler(of(1, 2), rpcContext(), hook, logger().logger);
    call.subscribe((v) => order.push(`value ${v}`));
    await new Promise((r) => setTimeout(r, 50));
    expect(order).toEqual(['hook replayed BillingHandler.onOrder 5 ctx', 'value 1', 'value 2']);
  });

  it("reports a refusal with the problem's code, and the error still goes back", async () => {
    const events: RpcWithoutHandlerEvent[] = [];
    const refusal = new RpcException({ code: 'idempotency_store_unavailable', status: 503 });
    const call = reportWithoutHandler(
      throwError(() => refusal),
      rpcContext(),
      (e) => void events.push(e),
      logger().logger,
    );
    await expect(firstValueFrom(call)).rejects.toBe(refusal);
    expect(events).toMatchObject([{ outcome: 'refused', code: 'idempotency_store_unavailable' }]);
  });

  it('reports nothing once the handler had the call', async () => {
    const events: RpcWithoutHandlerEvent[] = [];
    const context = rpcContext();
    const handled = watchHandler(context, { handle: () => of(7) }).handle();
    const call = reportWithoutHandler(
      handled,
      context,
      (e) => void events.push(e),
      logger().logger,
    );
    expect(await firstValueFrom(call.pipe(toArray()))).toEqual([7]);
    expect(events).toEqual([]);
  });

  it("reports nothing for a retry's later attempt once an earlier one ran the handler", async () => {
    const events: RpcWithoutHandlerEvent[] = [];
    const context = rpcContext();
    const hook = (e: RpcWithoutHandlerEvent) => void events.push(e);
    // The first attempt hands the call to its handler, which fails; the retry is refused.
    const first = watchHandler(context, { handle: () => throwError(() => new Error('flaky')) });
    await expect(firstValueFrom(reportWithoutHandler(first.handle(), context, hook, logger().logger))).rejects.toThrow('flaky'); // prettier-ignore
    const again = reportWithoutHandler(throwError(inProgress), context, hook, logger().logger);
    await expect(firstValueFrom(again)).rejects.toBeInstanceOf(RpcException);
    expect(events).toEqual([]);
    // Another call (another message) is still reported.
    const other = reportWithoutHandler(throwError(inProgress), rpcContext(), hook, logger().logger);
    await expect(firstValueFrom(other)).rejects.toBeInstanceOf(RpcException);
    expect(events).toMatchObject([{ outcome: 'refused', code: 'request_in_progress' }]);
  });

  it('logs a hook that throws and answers as it would have', async () => {
    const { errors, logger: log } = logger();
    const hook = () => {
      throw new Error('channel closed');
    };
    const call = reportWithoutHandler(of('replayed'), rpcContext(), hook, log);
    expect(await firstValueFrom(call)).toBe('replayed');
    expect(errors).toEqual(['onRpcWithoutHandler threw: channel closed']);
  });
});
