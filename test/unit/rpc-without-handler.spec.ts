import { describe, expect, it } from '@jest/globals';
import type { ExecutionContext, Logger } from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import { firstValueFrom, Observable, of, throwError, toArray } from 'rxjs';
import type { RpcWithoutHandlerEvent } from '../../lib/index.js';
import { runsToEnd } from '../../lib/transports/value/event-runs-to-end.js';
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

describe('reportWithoutHandler', () => {
  it('reports a replay once, naming the handler, and awaits the hook before the value', async () => {
    const order: string[] = [];
    const hook = async (e: RpcWithoutHandlerEvent) => {
      await new Promise((r) => setTimeout(r, 10));
      order.push(`hook ${e.outcome} ${e.handler} ${e.data.amount} ${e.context}`);
    };
    const call = reportWithoutHandler(of(1, 2), rpcContext(), hook, () => false, logger().logger);
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
      () => false,
      logger().logger,
    );
    await expect(firstValueFrom(call)).rejects.toBe(refusal);
    expect(events).toMatchObject([{ outcome: 'refused', code: 'idempotency_store_unavailable' }]);
  });

  it('reports nothing when the attempt handed the call to its handler', async () => {
    const events: RpcWithoutHandlerEvent[] = [];
    const watched = watchHandler({ handle: () => of(7) });
    const handled = watched.next.handle();
    const hook = (e: RpcWithoutHandlerEvent) => void events.push(e);
    const call = reportWithoutHandler(handled, rpcContext(), hook, watched.ran, logger().logger);
    expect(await firstValueFrom(call.pipe(toArray()))).toEqual([7]);
    expect(events).toEqual([]);
  });

  it("reports a retry's later attempt answered without the handler, though an earlier one ran it", async () => {
    // The handler failed without settling the message; the retry is answered by a replay.
    const events: RpcWithoutHandlerEvent[] = [];
    const context = rpcContext();
    const hook = (e: RpcWithoutHandlerEvent) => void events.push(e);
    const first = watchHandler({ handle: () => throwError(() => new Error('flaky')) });
    const attempt = reportWithoutHandler(first.next.handle(), context, hook, first.ran, logger().logger); // prettier-ignore
    await expect(firstValueFrom(attempt)).rejects.toThrow('flaky');
    expect(events).toEqual([]);
    const again = watchHandler({ handle: () => of('never') });
    const replayed = reportWithoutHandler(of({ id: 1 }), context, hook, again.ran, logger().logger);
    expect(await firstValueFrom(replayed)).toEqual({ id: 1 });
    expect(events).toMatchObject([{ outcome: 'replayed', handler: 'BillingHandler.onOrder' }]);
  });

  it('logs a hook that throws and answers as it would have', async () => {
    const { errors, logger: log } = logger();
    const hook = () => {
      throw new Error('channel closed');
    };
    const call = reportWithoutHandler(of('replayed'), rpcContext(), hook, () => false, log);
    expect(await firstValueFrom(call)).toBe('replayed');
    expect(errors).toEqual(['onRpcWithoutHandler threw: channel closed']);
  });
});

describe('runsToEnd', () => {
  it("keeps an event handler's call running when its subscriber leaves, and logs its late error", async () => {
    const { errors, logger: log } = logger();
    const steps: string[] = [];
    const source = new Observable<string>((subscriber) => {
      const timer = setTimeout(() => {
        steps.push('handler ran');
        subscriber.error(new Error('ledger down'));
      }, 20);
      return () => steps.push(`source unsubscribed, timer ${timer ? 'kept' : 'gone'}`);
    });
    const subscription = runsToEnd(source, 'LedgerHandler.onPaid', () => false, log).subscribe({
      error: () => steps.push('subscriber saw the error'),
    });
    subscription.unsubscribe(); // forkJoin ending for a sibling
    await new Promise((r) => setTimeout(r, 50));
    expect(steps).toEqual(['handler ran', 'source unsubscribed, timer kept']);
    expect(errors).toEqual([
      'LedgerHandler.onPaid failed after its caller left: Error: ledger down',
    ]);
  });

  it("cancels a started handler's stream when its subscriber leaves (an app's timeout)", async () => {
    const { errors, logger: log } = logger();
    const steps: string[] = [];
    const source = new Observable<string>(() => {
      const timer = setTimeout(() => steps.push('charged'), 20);
      return () => {
        clearTimeout(timer);
        steps.push('cancelled');
      };
    });
    runsToEnd(source, 'Charges.charge', () => true, log)
      .subscribe()
      .unsubscribe();
    await new Promise((r) => setTimeout(r, 50));
    expect(steps).toEqual(['cancelled']);
    expect(errors).toEqual([]);
  });

  it('passes values, errors and completion on while subscribed', async () => {
    const { logger: log } = logger();
    const passed = runsToEnd(of(1, 2), 'A.b', () => true, log);
    expect(await firstValueFrom(passed.pipe(toArray()))).toEqual([1, 2]);
    const failing = runsToEnd(
      throwError(() => new Error('x')),
      'A.b',
      () => true,
      log,
    );
    await expect(firstValueFrom(failing)).rejects.toThrow('x');
  });
});
