/**
 * `@Idempotent()` on a class and on its method (or a class-level one over methods with their own
 * interceptors): the class's attachment steps aside for the method's, so one call is handled once
 * whatever an app interceptor between or around them does (`retry()`, a hedge, a cache that
 * answers without calling on). Found by a review attacking an earlier fix that told the two
 * attachments apart with per-call state: a retry between them ran the handler with no claim.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CallHandler,
  Controller,
  ExecutionContext,
  Injectable,
  Module,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { EventPattern, MessagePattern, Payload, type ClientProxy } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { firstValueFrom, of, race, retry, switchMap, timer } from 'rxjs';
import {
  Idempotent,
  IdempotencyCtx,
  type IdempotencyContext,
  IdempotencyModule,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { startTcpMicroservice } from '../fixtures/tcp-microservice.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const runs = new Map<string, number>();
const bump = (ref: string) => {
  const n = (runs.get(ref) ?? 0) + 1;
  runs.set(ref, n);
  return n;
};

/** Method-level app retry: sits between the class-level and the method-level attachment. */
@Injectable()
class RetryOnce implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(retry({ count: 1, delay: () => timer(100) }));
  }
}
/** Hedge between the attachments. */
@Injectable()
class Hedge implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler) {
    return race(next.handle(), timer(100).pipe(switchMap(() => next.handle())));
  }
}
/** Global: hedge both synchronously when asked. */
@Injectable()
class GlobalHedge implements NestInterceptor {
  intercept(ctx: ExecutionContext, next: CallHandler) {
    const d = ctx.switchToRpc().getData();
    if (d?.syncHedge) return race(next.handle(), next.handle());
    if (d?.hedge) return race(next.handle(), timer(100).pipe(switchMap(() => next.handle())));
    if (d?.retry) return next.handle().pipe(retry({ count: 1, delay: () => timer(100) }));
    return next.handle();
  }
}
/** Cache: short-circuits when data.cached. */
@Injectable()
class Cache implements NestInterceptor {
  intercept(ctx: ExecutionContext, next: CallHandler) {
    if (ctx.switchToRpc().getData()?.cached) return of({ cached: true });
    return next.handle();
  }
}

const evA: string[] = [];
const evB: string[] = [];

@Idempotent()
@Controller()
class PaymentsHandler {
  @MessagePattern('retry.between')
  @Idempotent()
  @UseInterceptors(RetryOnce)
  async retryBetween(@Payload() data: { ref: string }) {
    const n = bump(data.ref);
    if (n === 1) throw new Error('flaky before charging');
    return { ref: data.ref, n };
  }

  @MessagePattern('hedge.between')
  @Idempotent()
  @UseInterceptors(Hedge)
  async hedgeBetween(@Payload() data: { ref: string }) {
    const n = bump(data.ref);
    await sleep(400);
    return { ref: data.ref, n };
  }

  @MessagePattern('plain')
  @Idempotent()
  async plain(@Payload() data: { ref: string; slowMs?: number; fail?: boolean }) {
    const n = bump(data.ref);
    await sleep(data.slowMs ?? 0);
    if (data.fail && n === 1) throw new Error('flaky');
    return { ref: data.ref, n };
  }

  @MessagePattern('cache')
  @Idempotent()
  @UseInterceptors(Cache)
  async cache(@Payload() data: { ref: string }) {
    const n = bump(data.ref);
    return { ref: data.ref, n };
  }

  @MessagePattern('tx')
  @Idempotent({ transactional: true })
  async tx(@Payload() data: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
    bump(data.ref);
    await idem.manager!.query('INSERT INTO tx_ledger (ref) VALUES ($1)', [data.ref]);
    return { ref: data.ref, tx: !!idem.manager };
  }

  @EventPattern('ev')
  async evOne(@Payload() data: { id: string }) {
    await sleep(30);
    evA.push(data.id);
  }
  @EventPattern('ev')
  async evTwo(@Payload() data: { id: string }) {
    await sleep(30);
    evB.push(data.id);
  }
}

@Controller()
class SoloHandler {
  @MessagePattern('solo')
  @Idempotent()
  async solo(@Payload() data: { ref: string; slowMs?: number }) {
    const n = bump(data.ref);
    await sleep(data.slowMs ?? 0);
    return { ref: data.ref, n };
  }
}

describe('class + method @Idempotent() on a microservice controller', () => {
  let db: MigratedDatabase;
  let client: ClientProxy;
  let close: () => Promise<void>;
  const send = (pattern: string, data: object) =>
    firstValueFrom(client.send(pattern, data)).then(
      (v) => ({ ok: true, v }),
      (e) => ({ ok: false, e: e?.code ?? e?.message ?? e }),
    );

  beforeAll(async () => {
    db = await createMigratedDatabase('doubled_rpc');
    await db.dataSource.query('CREATE TABLE tx_ledger (ref text NOT NULL)');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [PaymentsHandler, SoloHandler],
      providers: [{ provide: APP_INTERCEPTOR, useClass: GlobalHedge }],
    })
    class AppModule {}
    ({ client, close } = await startTcpMicroservice(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('retry() between class and method: the retried run is claimed and stored; a client retry replays', async () => {
    const ref = randomUUID();
    const idempotencyKey = randomUUID();
    const a = await send('retry.between', { ref, idempotencyKey });
    const rowsAfterFirst = await db.records('idempotency_key = $1', [idempotencyKey]);
    const b = await send('retry.between', { ref, idempotencyKey });
    expect({ a, b, runs: runs.get(ref), rows: rowsAfterFirst.map((r) => r.status) }).toEqual({
      a: { ok: true, v: { ref, n: 2 } },
      b: { ok: true, v: { ref, n: 2 } },
      runs: 2,
      rows: ['completed'],
    });
  });

  it('hedge between class and method: handler runs once', async () => {
    const ref = randomUUID();
    const idempotencyKey = randomUUID();
    const a = await send('hedge.between', { ref, idempotencyKey });
    await sleep(600);
    const rows = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect({ runs: runs.get(ref), a, rows: rows.map((r) => r.status) }).toEqual({
      runs: 1,
      a: expect.anything(),
      rows: ['completed'],
    });
  });

  it.each(['plain', 'solo'])(
    'global sync hedge (race of two next.handle()) on %s: the copy is refused, the handler never runs twice',
    async (pattern) => {
      const ref = randomUUID();
      const idempotencyKey = randomUUID();
      const a = await send(pattern, { ref, idempotencyKey, syncHedge: true, slowMs: 200 });
      // The refusal of the copy answers first; the first call then never runs, or runs once.
      expect(a).toEqual({ ok: false, e: 'request_in_progress' });
      await sleep(500);
      const again = await send(pattern, { ref, idempotencyKey, syncHedge: true, slowMs: 200 });
      await sleep(500);
      expect('e' in again ? again.e : 'ok').toMatch(/ok|request_in_progress|not_replayable/);
      expect(runs.get(ref) ?? 0).toBeLessThanOrEqual(1);
    },
  );

  it('global timer hedge: handler runs once', async () => {
    const ref = randomUUID();
    const idempotencyKey = randomUUID();
    const a = await send('plain', { ref, idempotencyKey, hedge: true, slowMs: 400 });
    await sleep(600);
    const rows = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect({ runs: runs.get(ref), rows: rows.map((r) => r.status), a }).toEqual({
      runs: 1,
      rows: ['completed'],
      a: expect.anything(),
    });
  });

  it('global retry: a thrown first run is retried under a claim and stored', async () => {
    const ref = randomUUID();
    const idempotencyKey = randomUUID();
    const a = await send('plain', { ref, idempotencyKey, retry: true, fail: true });
    const b = await send('plain', { ref, idempotencyKey, retry: true, fail: true });
    expect({ a, b, runs: runs.get(ref) }).toEqual({
      a: { ok: true, v: { ref, n: 2 } },
      b: { ok: true, v: { ref, n: 2 } },
      runs: 2,
    });
  });

  it('cache short-circuits one call, then a normal call and its retry', async () => {
    const ref = randomUUID();
    const c = await send('cache', { ref, idempotencyKey: randomUUID(), cached: true });
    const idempotencyKey = randomUUID();
    const a = await send('cache', { ref, idempotencyKey });
    const b = await send('cache', { ref, idempotencyKey });
    expect({ c, a, b, runs: runs.get(ref) }).toEqual({
      c: { ok: true, v: { cached: true } },
      a: { ok: true, v: { ref, n: 1 } },
      b: { ok: true, v: { ref, n: 1 } },
      runs: 1,
    });
  });

  it('class-level + method transactional', async () => {
    const ref = randomUUID();
    const idempotencyKey = randomUUID();
    const a = await send('tx', { ref, idempotencyKey });
    const b = await send('tx', { ref, idempotencyKey });
    const rows = await db.dataSource.query('SELECT * FROM tx_ledger WHERE ref = $1', [ref]);
    expect({ a, b, runs: runs.get(ref), ledger: rows.length }).toEqual({
      a: { ok: true, v: { ref, tx: true } },
      b: { ok: true, v: { ref, tx: true } },
      runs: 1,
      ledger: 1,
    });
  });

  it('two event handlers for one pattern in one class: both run once, redelivery deduped', async () => {
    const id = randomUUID();
    const idempotencyKey = randomUUID();
    await firstValueFrom(client.emit('ev', { id, idempotencyKey }), { defaultValue: undefined });
    await sleep(500);
    await firstValueFrom(client.emit('ev', { id, idempotencyKey }), { defaultValue: undefined });
    await sleep(500);
    const rows = await db.records('idempotency_key = $1', [idempotencyKey]);
    expect({
      a: evA.filter((x) => x === id).length,
      b: evB.filter((x) => x === id).length,
      rows: rows.map((r) => [r.endpoint, r.status]).sort(),
    }).toEqual({
      a: 1,
      b: 1,
      rows: [
        ['RPC ev PaymentsHandler.evOne', 'completed'],
        ['RPC ev PaymentsHandler.evTwo', 'completed'],
      ],
    });
  });
});
