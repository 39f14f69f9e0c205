import { describe, expect, it } from '@jest/globals';
import type { ExecutionContext, Logger } from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import { firstValueFrom, of, throwError, toArray } from 'rxjs';
import type { RpcWithoutHandlerEvent } from '../../lib/index.js';
import { reportWithoutHandler } from '../../lib/transports/value/rpc-without-handler.js';

const context = {
  switchToRpc: () => ({ getData: () => ({ amount: 5 }), getContext: () => 'ctx' }),
} as unknown as ExecutionContext;

function logger() {
  const errors: string[] = [];
  return { errors, logger: { error: (m: string) => errors.push(m) } as unknown as Logger };
}

describe('reportWithoutHandler', () => {
  it('reports a replay once, and awaits the hook before the value goes back', async () => {
    const order: string[] = [];
    const hook = async (e: RpcWithoutHandlerEvent) => {
      await new Promise((r) => setTimeout(r, 10));
      order.push(`hook ${e.outcome} ${e.data.amount} ${e.context}`);
    };
    const call = reportWithoutHandler(of(1, 2), context, hook, () => false, logger().logger);
    call.subscribe((v) => order.push(`value ${v}`));
    await new Promise((r) => setTimeout(r, 50));
    expect(order).toEqual(['hook replayed 5 ctx', 'value 1', 'value 2']);
  });

  it("reports a refusal with the problem's code, and the error still goes back", async () => {
    const events: RpcWithoutHandlerEvent[] = [];
    const refusal = new RpcException({ code: 'idempotency_store_unavailable', status: 503 });
    const call = reportWithoutHandler(
      throwError(() => refusal),
      context,
      (e) => void events.push(e),
      () => false,
      logger().logger,
    );
    await expect(firstValueFrom(call)).rejects.toBe(refusal);
    expect(events).toMatchObject([{ outcome: 'refused', code: 'idempotency_store_unavailable' }]);
  });

  it('reports nothing once the handler ran', async () => {
    const events: RpcWithoutHandlerEvent[] = [];
    const call = reportWithoutHandler(
      of(7),
      context,
      (e) => void events.push(e),
      () => true,
      logger().logger,
    );
    expect(await firstValueFrom(call.pipe(toArray()))).toEqual([7]);
    expect(events).toEqual([]);
  });

  it('logs a hook that throws and answers as it would have', async () => {
    const { errors, logger: log } = logger();
    const hook = () => {
      throw new Error('channel closed');
    };
    const call = reportWithoutHandler(of('replayed'), context, hook, () => false, log);
    expect(await firstValueFrom(call)).toBe('replayed');
    expect(errors).toEqual(['onRpcWithoutHandler threw: channel closed']);
  });
});
