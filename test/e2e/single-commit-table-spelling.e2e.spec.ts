/**
 * Two instances of one service on one database, one configured with the default `tableName`, the
 * other with the same table schema-qualified (`public.idempotency_keys`, e.g. a rolling deploy
 * that made the name explicit), found by attack-74. The scope's advisory lock (which single-commit
 * relies on to refuse a duplicate while the first run's transaction is open) and the cleanup's
 * lock were keyed by the tableName string, so the two instances never excluded each other: both
 * handlers ran. The locks are now keyed by the name without `public.`, and the default
 * spelling's keys are those of earlier releases (test/unit/scope-lock.spec.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyCleanupService,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
  type TransactionClient,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const processorCalls = new Map<string, number>();

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent({ transactional: 'single' })
  async charge(
    @Body() body: { ref: string },
    @IdempotencyCtx() idem: IdempotencyContext<TransactionClient>,
  ) {
    processorCalls.set(body.ref, (processorCalls.get(body.ref) ?? 0) + 1);
    await sleep(1_000);
    await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref + randomUUID()]);
    return { id: `pay_${body.ref}` };
  }
}

describe('single-commit, two instances, tableName spelled two ways', () => {
  let db: MigratedDatabase;
  const pools: pg.Pool[] = [];
  const apps: ListeningApp[] = [];
  const instance = async (tableName?: string) => {
    const pool = new pg.Pool({ connectionString: db.url, max: 5 });
    pools.push(pool);
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          pool,
          cleanup: { enabled: false, retentionSeconds: 0 },
          ...(tableName ? { tableName } : {}),
        }),
      ],
      controllers: [ChargesController],
    })
    class AppModule {}
    const app = await listenApp(AppModule, 'express');
    apps.push(app);
    return app;
  };
  let a: ListeningApp;
  let b: ListeningApp;
  beforeAll(async () => {
    db = await createMigratedDatabase('spelling');
    await db.dataSource.query('CREATE TABLE ledger (ref text PRIMARY KEY)');
    a = await instance();
    b = await instance('public.idempotency_keys');
  });
  afterAll(async () => {
    for (const app of apps) await app.close().catch(() => undefined);
    for (const pool of pools) await pool.end().catch(() => undefined);
    await db?.drop();
  });

  it('a concurrent duplicate on the other instance gets 409, the processor is called once', async () => {
    const key = randomUUID();
    const ref = `spell-${randomUUID()}`;
    const first = send(a.url, '/charges', { key, body: { ref } });
    await sleep(200);
    const dup = await send(b.url, '/charges', { key, body: { ref } });
    const firstRes = await first;
    expect({
      statuses: [firstRes.status, dup.status].sort(),
      processorCalls: processorCalls.get(ref),
    }).toEqual({ statuses: [201, 409], processorCalls: 1 });
  }, 30_000);

  it("the schema-qualified instance skips cleanup while the default spelling's lock is held", async () => {
    const other = new pg.Client({ connectionString: db.url });
    await other.connect();
    try {
      await other.query(`SELECT pg_advisory_lock(hashtextextended($1, 0))`, [
        'nestjs-pg-idempotency:cleanup:idempotency_keys',
      ]);
      expect(await b.app.get(IdempotencyCleanupService).run()).toMatchObject({ ran: false });
      await other.query(`SELECT pg_advisory_unlock_all()`);
      expect(await b.app.get(IdempotencyCleanupService).run()).toMatchObject({ ran: true });
    } finally {
      await other.end();
    }
  });
});
