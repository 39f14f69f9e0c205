/**
 * An RPC handler's Observable that emits its receipt and then fails acted: its key is completed
 * without a body, never freed. Also when the caller is gone before it fails: the app's global
 * timeout() (the NestJS docs' TimeoutInterceptor) fires first, since the values are held until
 * the Observable ends, or Nest's forkJoin drops an event handler whose sibling failed. Until
 * 2026-12-05 the key was then freed as if nothing had been emitted, and the retry charged again
 * (found by helper-68).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  type CallHandler,
  Controller,
  Injectable,
  Module,
  type NestInterceptor,
  RequestTimeoutException,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { EventPattern, MessagePattern, Payload, type ClientProxy } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { catchError, firstValueFrom, Observable, throwError, timeout, TimeoutError } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { startTcpMicroservice } from '../fixtures/tcp-microservice.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let charges = 0;

/** The NestJS docs' TimeoutInterceptor (5 s there; 300 ms here), applied globally. */
@Injectable()
class TimeoutInterceptor implements NestInterceptor {
  intercept(_context: unknown, next: CallHandler) {
    return next.handle().pipe(
      timeout(300),
      catchError((err) =>
        err instanceof TimeoutError
          ? throwError(() => new RequestTimeoutException())
          : throwError(() => err),
      ),
    );
  }
}

@Controller()
class PaymentsHandler {
  /** Charges, sends the receipt, then a follow-up step (the receipt e-mail) fails. */
  @MessagePattern('payments.charge')
  @Idempotent()
  charge(@Payload() data: { amount: number; idempotencyKey: string }) {
    return new Observable((subscriber) => {
      charges++;
      subscriber.next({ charged: data.amount });
      setTimeout(() => subscriber.error(new Error('receipt e-mail failed')), 600);
    });
  }
}

let eventCharges = 0;

@Controller()
class BillingHandler {
  /** An event handler: charges, emits the receipt, then its follow-up step fails. */
  @EventPattern('order.paid')
  @Idempotent()
  onPaid(@Payload() _data: { idempotencyKey: string }) {
    return new Observable((subscriber) => {
      eventCharges++;
      subscriber.next({ charged: true });
      setTimeout(() => subscriber.error(new Error('receipt e-mail failed')), 400);
    });
  }
}

@Controller()
class LedgerHandler {
  /** A sibling handler of the same event (no @Idempotent()), whose ledger is down for a moment. */
  @EventPattern('order.paid')
  async onPaid(@Payload() _data: unknown) {
    await sleep(150);
    throw new Error('ledger unavailable');
  }
}

describe('an RPC stream that fails after its receipt, behind the docs TimeoutInterceptor', () => {
  let db: MigratedDatabase;
  let client: ClientProxy;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('a68early');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [PaymentsHandler, BillingHandler, LedgerHandler],
      providers: [{ provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor }],
    })
    class AppModule {}
    ({ client, close } = await startTcpMicroservice(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('never charges twice for one key (the key is completed, not freed)', async () => {
    const idempotencyKey = randomUUID();
    const send = () =>
      firstValueFrom(
        client.send('payments.charge', { amount: 700, idempotencyKey }).pipe(timeout(5000)),
      ).then(
        (v) => ({ v }),
        (e) => ({ e }),
      );
    const first = await send();
    expect(first).toHaveProperty('e'); // the app's timeout answered first
    await sleep(1000); // the stream has emitted its receipt and failed by now
    const [row] = await db.records('idempotency_key = $1', [idempotencyKey]);
    const retry = await send();
    expect(charges).toBe(1);
    expect(row).toMatchObject({ status: 'completed' });
    expect(retry).toMatchObject({ e: { code: 'idempotency_response_not_replayable' } });
  }, 20_000);

  it('an event handler whose sibling failed (Nest’s forkJoin left it) is never run twice for one key', async () => {
    const idempotencyKey = randomUUID();
    await firstValueFrom(client.emit('order.paid', { idempotencyKey }), {
      defaultValue: undefined,
    });
    await sleep(1000); // BillingHandler charged, emitted, and failed after the ledger's failure
    const [row] = await db.records('idempotency_key = $1', [idempotencyKey]);
    // The broker (or the sender) delivers the event again, as it does after a consumer's failure.
    await firstValueFrom(client.emit('order.paid', { idempotencyKey }), {
      defaultValue: undefined,
    });
    await sleep(1000);
    expect(eventCharges).toBe(1);
    expect(row).toMatchObject({ status: 'completed' });
  }, 20_000);
});

let refusedCharges = 0;

@Controller()
class ErrorlessStoreHandler {
  @MessagePattern('payments.charge.strict')
  @Idempotent()
  charge(@Payload() _data: { idempotencyKey: string }) {
    return new Observable((subscriber) => {
      refusedCharges++;
      subscriber.next({ charged: true });
      subscriber.error(new Error('receipt e-mail failed'));
    });
  }
}

describe('an RPC stream that fails after its receipt, under a storeIf that refuses errors', () => {
  let db: MigratedDatabase;
  let client: ClientProxy;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('rpcstrict');
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          storeIf: (_status, error) => error === undefined,
        }),
      ],
      controllers: [ErrorlessStoreHandler],
    })
    class AppModule {}
    ({ client, close } = await startTcpMicroservice(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('completes the key without a body: the handler acted, so it is not freed', async () => {
    const idempotencyKey = randomUUID();
    const send = () =>
      firstValueFrom(client.send('payments.charge.strict', { idempotencyKey })).then(
        (v) => ({ v }),
        (e) => ({ e }),
      );
    expect(await send()).toEqual({ v: { charged: true } });
    const retry = await send();
    expect(refusedCharges).toBe(1);
    const [row] = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect(row).toMatchObject({ status: 'completed', response_raw: null });
    expect(retry).toMatchObject({ e: { code: 'idempotency_response_not_replayable' } });
  });
});
