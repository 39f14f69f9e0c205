import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, HttpException, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import type { Platform } from '../fixtures/payments.fixture.js';

interface ChargeBody {
  ref: string;
  /** What happens after the ledger insert, before the handler returns. */
  then?: 'succeed' | 'throw' | 'decline' | 'kill-connection' | 'lose-lease';
  callOutMs?: number;
}

function ledgerController(dataSource: DataSource) {
  @Controller('ledger')
  class LedgerController {
    @Post()
    @Idempotent({ transactional: true, transactionId: (body) => (body as { id?: string })?.id })
    async charge(@Body() body: ChargeBody, @IdempotencyCtx() idem: IdempotencyContext) {
      const manager = idem.manager!;
      // A call out before the first write: the transaction has not started, so no connection is held.
      if (body.callOutMs) await new Promise((r) => setTimeout(r, body.callOutMs));
      if (body.then === 'lose-lease') {
        // Meanwhile another instance took the key over (e.g. after our lease ran out). Once the
        // transaction has begun it cannot: the claim row is locked in it.
        await dataSource.query(
          `UPDATE idempotency_keys SET owner_token = gen_random_uuid() WHERE idempotency_key = $1`,
          [idem.scope.key],
        );
      }
      const [{ id }] = await manager.query(
        `INSERT INTO ledger (ref, status) VALUES ($1, $2) RETURNING id::text`,
        [body.ref, body.then === 'decline' ? 'declined' : 'succeeded'],
      );
      switch (body.then) {
        case 'throw':
          throw new Error('processor timeout after the insert');
        case 'decline':
          throw new HttpException({ code: 'card_declined', id }, 402);
        case 'kill-connection': {
          const [{ pid }] = await manager.query('SELECT pg_backend_pid() AS pid');
          await dataSource.query('SELECT pg_terminate_backend($1)', [pid]);
          // Termination is asynchronous: wait until the backend is really gone.
          while (
            (await dataSource.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).length
          ) {
            await new Promise((r) => setTimeout(r, 10));
          }
          break;
        }
      }
      return { id, ref: body.ref };
    }
  }
  return LedgerController;
}

describe.each<Platform>(['express', 'fastify'])('transactional mode on %s', (platform) => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase(`tx_${platform}`);
    await db.dataSource.query(
      `CREATE TABLE ledger (id bigserial PRIMARY KEY, ref text NOT NULL, status text NOT NULL)`,
    );
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [ledgerController(db.dataSource)],
    })
    class AppModule {}
    ({ url, close } = await listenApp(AppModule, platform));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  const ledger = async (ref: string) =>
    (await db.dataSource.query(`SELECT status FROM ledger WHERE ref = $1`, [ref])).map(
      (r: any) => r.status,
    );
  const record = async (key: string) => (await db.records('idempotency_key = $1', [key]))[0];

  it("commits the handler's writes together with the completed record", async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const first = await send(url, '/ledger', { key, body: { ref } });
    expect(first.status).toBe(201);
    const again = await send(url, '/ledger', { key, body: { ref } });
    expect(again.body.equals(first.body)).toBe(true);
    expect(await ledger(ref)).toEqual(['succeeded']);
    expect(await record(key)).toMatchObject({
      status: 'completed',
      transaction_id: first.json().id,
    });
  });

  it('holds no connection while the handler calls out before its first write', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const pending = send(url, '/ledger', { key, body: { ref, callOutMs: 400 } });
    await new Promise((r) => setTimeout(r, 200));
    const open = await db.dataSource.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND state LIKE 'idle in transaction%'`,
    );
    expect(open).toEqual([{ n: 0 }]);
    expect((await pending).status).toBe(201);
    expect(await ledger(ref)).toEqual(['succeeded']);
  });

  it('rolls the writes back when the handler throws, and a retry starts clean', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    expect((await send(url, '/ledger', { key, body: { ref, then: 'throw' } })).status).toBe(500);
    expect(await ledger(ref)).toEqual([]);
    expect(await record(key)).toBeUndefined();
    // The client retries the same logical operation (the processor is fine now).
    expect((await send(url, '/ledger', { key, body: { ref, then: 'throw' } })).status).toBe(500);
    expect(await ledger(ref)).toEqual([]);
  });

  it('commits a business failure (402) with its own writes and replays it', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const first = await send(url, '/ledger', { key, body: { ref, then: 'decline' } });
    expect(first.status).toBe(402);
    const again = await send(url, '/ledger', { key, body: { ref, then: 'decline' } });
    expect(again.status).toBe(402);
    expect(again.body.equals(first.body)).toBe(true);
    expect(await ledger(ref)).toEqual(['declined']);
    expect((await record(key)).transaction_id).toBe(first.json().id);
  });

  it('leaves nothing half-done when the work dies between the insert and the commit', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const res = await send(url, '/ledger', { key, body: { ref, then: 'kill-connection' } });
    // The handler "succeeded", but nothing was committed: the client must not see a 201.
    expect(res.status).toBe(503);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(await ledger(ref)).toEqual([]);
    expect(await record(key)).toBeUndefined();
    const retry = await send(url, '/ledger', { key, body: { ref } });
    expect(retry.status).toBe(201);
    expect(await ledger(ref)).toEqual(['succeeded']);
  });

  it("fails closed when the claim was taken over before its transaction began: the new owner's record wins", async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const res = await send(url, '/ledger', { key, body: { ref, then: 'lose-lease' } });
    expect(res.status).toBe(503);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json()).toMatchObject({ detail: expect.stringContaining('taken over') });
    expect(await ledger(ref)).toEqual([]);
    // Fenced: neither completed nor deleted by the process that lost the lease.
    expect(await record(key)).toMatchObject({ status: 'in_progress' });
  });
});
