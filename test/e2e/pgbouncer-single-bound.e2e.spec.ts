/**
 * Single-commit's time bound behind PgBouncer 1.18 (transaction pooling, preparedStatements:
 * false, the documented setting), found by attack-74. A handler's statement runs past
 * singleCommitMaxSeconds: the store answers 503 and ends the transaction's backend. It used to
 * terminate `client.processID`, which behind PgBouncer is PgBouncer's cancel key, not a backend's
 * pid: nothing was ended, the backend kept the statement running and the scope's advisory lock,
 * and the retry the 503 asks for got 409 (a matching pid would have killed an unrelated session).
 * The store now learns the backend's own pid, and its transaction's start, in the claim's lock
 * statement, and terminates that backend only while that transaction is still open on it.
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
import { buildSingleCommitStatements } from '../../lib/store/postgres/single-commit.sql.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { startPgBouncer, type PgBouncer } from '../fixtures/pgbouncer.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let calls = 0;

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent({ transactional: 'single' })
  async charge(
    @Body() body: { ref: string },
    @IdempotencyCtx() idem: IdempotencyContext<TransactionClient>,
  ) {
    calls++;
    // The first run's statement is slow (a lock wait, a slow report query): 12 s.
    if (calls === 1) await idem.manager!.query("SELECT pg_sleep(12), 'bnc-bound-slow' AS tag");
    await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref + randomUUID()]);
    return { id: `pay_${body.ref}` };
  }
}

describe('single-commit past its bound behind PgBouncer (transaction pooling)', () => {
  let db: MigratedDatabase;
  let bouncer: PgBouncer;
  let pool: pg.Pool;
  let app: ListeningApp;

  beforeAll(async () => {
    db = await createMigratedDatabase('bnc_bound');
    await db.dataSource.query('CREATE TABLE ledger (ref text PRIMARY KEY)');
    bouncer = await startPgBouncer({ poolMode: 'transaction', defaultPoolSize: 4 });
    pool = new pg.Pool({ connectionString: bouncer.url(db.name), max: 5 });
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          pool,
          preparedStatements: false,
          cleanup: { enabled: false },
          singleCommitMaxSeconds: 2,
        }),
      ],
      controllers: [ChargesController],
    })
    class AppModule {}
    app = await listenApp(AppModule, 'express');
  });
  afterAll(async () => {
    await app?.close();
    await pool?.end().catch(() => undefined);
    await bouncer?.stop();
    await db?.drop();
  });

  it('after the 503, the backend is gone and the retry runs (as directly connected)', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const first = await send(app.url, '/charges', { key, body: { ref } });
    await sleep(500);
    const still = await db.dataSource.query(
      "SELECT pid FROM pg_stat_activity WHERE query LIKE '%bnc-bound-slow%' AND pid <> pg_backend_pid()",
    );
    const retry = await send(app.url, '/charges', { key, body: { ref } });
    expect({
      first: first.status,
      backendsStillRunningTheAbortedStatement: still.length,
      retry: retry.status,
      retryCode: retry.status === 201 ? undefined : retry.json().code,
    }).toEqual({
      first: 503,
      backendsStillRunningTheAbortedStatement: 0,
      retry: 201,
      retryCode: undefined,
    });
  }, 40_000);

  it('terminates the backend only while the transaction the lock statement saw is open', async () => {
    const { lock, terminate } = buildSingleCommitStatements('idempotency_keys');
    const other = new pg.Client({ connectionString: db.url });
    const lost: Error[] = [];
    other.on('error', (err) => lost.push(err));
    await other.connect();
    try {
      const backendOf = async () => {
        await other.query('BEGIN');
        const { rows } = await other.query(lock.text, ['42']);
        return [rows[0].pid as number, rows[0].xact_started as string];
      };
      const ended = await backendOf();
      await other.query('COMMIT');
      // The same backend, now in another transaction (a pooler handed it to another client).
      await backendOf();
      const { rows } = await pool.query(terminate.text, ended);
      expect(rows).toEqual([]);
      expect((await other.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      await other.query('ROLLBACK');
      const open = await backendOf();
      const killed = await pool.query(terminate.text, open);
      expect(killed.rows).toEqual([{ pg_terminate_backend: true }]);
      await expect(other.query('SELECT 1')).rejects.toThrow();
    } finally {
      await other.end().catch(() => undefined);
    }
  });
});
