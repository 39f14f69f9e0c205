/**
 * A global retry interceptor on a TCP microservice: a message whose key is in progress is
 * refused, the interceptor sends it again, and it is refused again: a call that comes back is
 * handled again, never passed to the handler without a claim. A call made again while the first
 * still runs (a hedge) is refused as in progress.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CallHandler,
  Controller,
  ExecutionContext,
  Injectable,
  Module,
  NestInterceptor,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { MessagePattern, Payload, type ClientProxy } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { firstValueFrom, race, retry, switchMap, timer } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { startTcpMicroservice } from '../fixtures/tcp-microservice.js';

const runs = new Map<string, number>();

@Injectable()
class RetryOnceInterceptor implements NestInterceptor {
  intercept(ctx: ExecutionContext, next: CallHandler) {
    // A hedge: the same call again if the first has not answered in 100 ms; the first answer wins.
    if (ctx.switchToRpc().getData()?.hedge) {
      return race(next.handle(), timer(100).pipe(switchMap(() => next.handle())));
    }
    return next.handle().pipe(retry({ count: 1, delay: () => timer(300) }));
  }
}

@Controller()
class PaymentsHandler {
  @MessagePattern('payments.create')
  @Idempotent()
  async create(@Payload() data: { ref: string; slowMs?: number }) {
    runs.set(data.ref, (runs.get(data.ref) ?? 0) + 1);
    await new Promise((r) => setTimeout(r, data.slowMs ?? 0));
    return { id: `pay_${randomUUID()}` };
  }
}

describe('RPC (TCP) with a global retry interceptor', () => {
  let db: MigratedDatabase;
  let client: ClientProxy;
  let close: () => Promise<void>;
  const send = (data: object) =>
    firstValueFrom(client.send('payments.create', data)).then(
      (v) => ({ ok: true, v }),
      (e) => ({ ok: false, e }),
    );

  beforeAll(async () => {
    db = await createMigratedDatabase('rpc_retry');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [PaymentsHandler],
      providers: [{ provide: APP_INTERCEPTOR, useClass: RetryOnceInterceptor }],
    })
    class AppModule {}
    ({ client, close } = await startTcpMicroservice(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('a duplicate message while the first runs never runs the handler twice', async () => {
    const ref = randomUUID();
    const idempotencyKey = randomUUID();
    const first = send({ ref, slowMs: 1500, idempotencyKey });
    await new Promise((r) => setTimeout(r, 200));
    const dup = await send({ ref, slowMs: 1500, idempotencyKey });
    await first;
    expect({ runs: runs.get(ref), dupOk: dup.ok }).toEqual({ runs: 1, dupOk: false });
  });

  it('the same call made again while it runs (a hedge) is refused, never run', async () => {
    const ref = randomUUID();
    const idempotencyKey = randomUUID();
    const first = await send({ ref, slowMs: 400, idempotencyKey, hedge: true });
    expect(first).toMatchObject({ ok: false, e: { code: 'request_in_progress' } });
    await new Promise((r) => setTimeout(r, 600));
    expect(runs.get(ref)).toBe(1);
    const [row] = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect(row).toMatchObject({ status: 'completed' });
  });
});
