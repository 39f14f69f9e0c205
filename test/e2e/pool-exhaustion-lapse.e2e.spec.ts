/**
 * helper-74: transactional handlers (`transactional: true`, READ COMMITTED) hold the pool's
 * connections while they call the processor; the lease renewal needs one more connection of the
 * same pool, waits `statementTimeoutMs`, and fails ("Lease renewal failed"). PostgreSQL is up the
 * whole time, nothing crashed, the handlers are well within maxHoldSeconds. The lease lapses and a
 * retry the load balancer sends to a second instance takes the key over and charges again.
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

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent({ transactional: true })
  async charge(
    @Body() body: { ref: string },
    @IdempotencyCtx() idem: IdempotencyContext<TransactionClient>,
  ) {
    await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref + randomUUID()]);
    charges.set(body.ref, (charges.get(body.ref) ?? 0) + 1);
    await sleep(6_000); // the card processor
    return { id: `pay_${body.ref}` };
  }
}

describe('pool busy with transactional handlers: lease renewals fail, lease lapses', () => {
  let db: MigratedDatabase;
  const pools: pg.Pool[] = [];
  const apps: ListeningApp[] = [];

  const instance = async (max: number) => {
    const pool = new pg.Pool({ connectionString: db.url, max });
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
      controllers: [ChargesController],
    })
    class AppModule {}
    const nest = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
    await nest.listen(0, '127.0.0.1');
    const app = {
      app: nest,
      url: `http://127.0.0.1:${nest.getHttpServer().address().port}`,
      close: () => nest.close(),
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
});
