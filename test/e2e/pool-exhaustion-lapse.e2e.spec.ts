/**
 * helper-74: transactional handlers (`transactional: true`, READ COMMITTED) hold the pool's
 * connections while they call the processor; the lease renewal needs one more connection of the
 * same pool, waits `statementTimeoutMs`, and fails ("Lease renewal failed"). PostgreSQL is up the
 * whole time, nothing crashed, the handlers are well within maxHoldSeconds. The lease lapses and a
 * retry the load balancer sends to a second instance takes the key over and charges again.
 *
 * attack-79: the fix above (a transactional run locks its claim row and stops renewing) left every
 * other run on that pool renewing through it: a plain run, and a transactional one before its first
 * query (a processor called first, as docs/transactional-modes.md advises). Their leases lapsed
 * the same way. A renewal now goes on a connection of the store's own when the pool has none
 * to spare, ended with the app.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
  type TransactionClient,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { type ListeningApp } from '../fixtures/listen.js';
import { NestFactory } from '@nestjs/core';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const charges = new Map<string, number>();
const count = (ref: string) => charges.set(ref, (charges.get(ref) ?? 0) + 1);

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent({ transactional: true })
  async charge(
    @Body() body: { ref: string },
    @IdempotencyCtx() idem: IdempotencyContext<TransactionClient>,
  ) {
    await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref + randomUUID()]);
    count(body.ref);
    await sleep(6_000); // the card processor
    return { id: `pay_${body.ref}` };
  }
}

@Controller()
class RefundsController {
  /** Plain mode: no database work of its own, only the processor call. */
  @Post('refunds')
  @Idempotent()
  async refund(@Body() body: { ref: string }) {
    count(body.ref);
    await sleep(6_000);
    return { id: `re_${body.ref}` };
  }

  /** Transactional, calling the processor before its first write (its BEGIN is lazy). */
  @Post('captures')
  @Idempotent({ transactional: true })
  async capture(
    @Body() body: { ref: string },
    @IdempotencyCtx() idem: IdempotencyContext<TransactionClient>,
  ) {
    count(body.ref);
    await sleep(6_000);
    await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref + randomUUID()]);
    return { id: `cap_${body.ref}` };
  }
}

describe('pool busy with transactional handlers: lease renewals fail, lease lapses', () => {
  let db: MigratedDatabase;
  const pools: pg.Pool[] = [];
  const apps: ListeningApp[] = [];

  const instance = async (max: number, name = 'pool-lapse') => {
    const pool = new pg.Pool({ connectionString: db.url, max, application_name: name });
    pools.push(pool);
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          pool,
          cleanup: { enabled: false },
          leaseSeconds: 3,
          maxHoldSeconds: 60,
          statementTimeoutMs: 1_000,
        }),
      ],
      controllers: [ChargesController, RefundsController],
    })
    class AppModule {}
    const nest = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
    await nest.listen(0, '127.0.0.1');
    const app = {
      app: nest,
      url: `http://127.0.0.1:${nest.getHttpServer().address().port}`,
      close: () => nest.close(),
      pool,
    };
    apps.push(app);
    return app;
  };

  beforeAll(async () => {
    db = await createMigratedDatabase('a74pool');
    await db.dataSource.query('CREATE TABLE ledger (ref text PRIMARY KEY)');
  });
  afterAll(async () => {
    for (const a of apps) await a.close().catch(() => undefined);
    for (const p of pools) await p.end().catch(() => undefined);
    await db?.drop();
  });

  it('a retry on the second instance while the first still runs gets 409, never a second charge', async () => {
    const a = await instance(2);
    const b = await instance(5);
    const keys = [randomUUID(), randomUUID()];
    const refs = keys.map(() => `pool-${randomUUID()}`);
    const firsts = keys.map((key, i) => send(a.url, '/charges', { key, body: { ref: refs[i] } }));
    await sleep(4_500); // within the handler (6 s), past one lease (3 s)
    const retry = await send(b.url, '/charges', { key: keys[0], body: { ref: refs[0] } });
    const answered = await Promise.all(firsts);
    expect({
      retry: retry.status,
      firsts: answered.map((r) => r.status),
      charges: charges.get(refs[0]),
    }).toEqual({ retry: 409, firsts: [201, 201], charges: 1 });
  }, 40_000);

  const backends = async (name: string): Promise<number> =>
    (
      await db.dataSource.query(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
        [name],
      )
    )[0].n;

  it('a plain run keeps its claim on its own connection while transactional handlers hold the pool', async () => {
    const a = await instance(2, 'pool-lapse-a');
    const b = await instance(5);
    const key = randomUUID();
    const ref = `refund-${randomUUID()}`;
    const first = send(a.url, '/refunds', { key, body: { ref } });
    await sleep(300); // the refund is claimed and calls the processor
    const held = [0, 1].map(() =>
      send(a.url, '/charges', { key: randomUUID(), body: { ref: `charge-${randomUUID()}` } }),
    );
    await sleep(4_500); // within the refund's handler (6 s), past one lease (3 s)
    const retry = await send(b.url, '/refunds', { key, body: { ref } });
    // The pool's two connections, and the one the renewals went on.
    const during = await backends('pool-lapse-a');
    const answered = await first;
    const heldStatuses = (await Promise.all(held)).map((r) => r.status);
    await a.close();
    const afterClose = (await backends('pool-lapse-a')) - a.pool.totalCount;
    const [row] = await db.dataSource.query(
      'SELECT runs FROM idempotency_keys WHERE idempotency_key = $1',
      [key],
    );
    expect({
      retry: retry.status,
      first: answered.status,
      held: heldStatuses,
      refunds: charges.get(ref),
      runs: row?.runs,
      during,
      afterClose,
    }).toEqual({
      retry: 409,
      first: 201,
      held: [201, 201],
      refunds: 1,
      runs: 1,
      during: 3,
      afterClose: 0,
    });
  }, 40_000);

  it('a transactional run calling out before its first write keeps its claim the same way', async () => {
    const a = await instance(2);
    const b = await instance(5);
    const key = randomUUID();
    const ref = `capture-${randomUUID()}`;
    const first = send(a.url, '/captures', { key, body: { ref } });
    await sleep(300);
    const held = [0, 1].map(() =>
      send(a.url, '/charges', { key: randomUUID(), body: { ref: `charge-${randomUUID()}` } }),
    );
    await sleep(4_500);
    const retry = await send(b.url, '/captures', { key, body: { ref } });
    const answered = await first;
    await Promise.all(held);
    expect({ retry: retry.status, first: answered.status, calls: charges.get(ref) }).toEqual({
      retry: 409,
      first: 201,
      calls: 1,
    });
  }, 40_000);
});
