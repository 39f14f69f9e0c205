import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import {
  createMigratedDatabase,
  defaultIsolation,
  type MigratedDatabase,
} from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';

const FIRST_CALLS = 30;

/**
 * SERIALIZABLE as the database's default, and a records table the size of a live one: its
 * predicate locks then cover what each transaction reads, page by page, and two transactions
 * conflict only when they read what the other writes.
 */
describe('SERIALIZABLE (database default): concurrent transactional first calls on distinct keys', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;
  const exec = new Executions();
  // Requests whose handler's own statement PostgreSQL refused (40001): the handler threw.
  const refusedInHandler = new Set<string>();

  beforeAll(async () => {
    db = await createMigratedDatabase('settings_serializable');
    await defaultIsolation(db, 'serializable');
    await db.dataSource.query(`CREATE TABLE ledger (route text NOT NULL, ref text NOT NULL)`);
    await db.dataSource.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, status_code)
       SELECT gen_random_uuid()::text, 'POST /older', repeat('0', 64), 'completed', 201
         FROM generate_series(1, 100000)`,
    );
    await db.dataSource.query('ANALYZE idempotency_keys');
    const dataSource = db.newDataSource();
    await dataSource.initialize();

    const write = async (route: string, ref: string, idem: IdempotencyContext) => {
      exec.hit(route, ref);
      try {
        await idem.manager!.query('INSERT INTO ledger (route, ref) VALUES ($1, $2)', [route, ref]);
      } catch (err) {
        if ((err as { driverError?: { code?: string } }).driverError?.code === '40001') {
          refusedInHandler.add(ref);
        }
        throw err;
      }
      return { ref };
    };
    @Controller('ser')
    class SerializableController {
      @Post('tx')
      @Idempotent({ transactional: true })
      tx(@Body() body: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
        return write('tx', body.ref, idem);
      }

      @Post('single')
      @Idempotent({ transactional: 'single' })
      single(@Body() body: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
        return write('single', body.ref, idem);
      }
    }

    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource, cleanup: { enabled: false }, replayCache: false }),
      ],
      controllers: [SerializableController],
    })
    class AppModule {}
    ({ url, close } = await listenApp(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  // Before the claim's own statements stopped matching the partial index on in-progress rows
  // (the planner scanned it whole, locking the pages every claim writes), mode true answered
  // 201 to 0-1 of 30. A few conflicts on shared primary-key pages remain possible: the store's
  // statement refused answers 503, the handler's own statement refused answers the handler's
  // error (500 here); either way nothing was committed.
  it.each(['tx', 'single'])(
    '%s: nearly all answer 201; a refused one (503, or the handler error) committed nothing',
    async (route) => {
      const refs = Array.from({ length: FIRST_CALLS }, () => randomUUID());
      const answers = await Promise.all(
        refs.map((ref) => send(url, `/ser/${route}`, { key: ref, body: { ref } })),
      );
      const statuses = answers.map((a) => a.status);
      const unexpected = refs.filter(
        (ref, i) =>
          statuses[i] !== 201 &&
          statuses[i] !== 503 &&
          !(statuses[i] === 500 && refusedInHandler.has(ref)),
      );
      expect(unexpected.map((ref) => statuses[refs.indexOf(ref)])).toEqual([]);
      const created = refs.filter((_, i) => statuses[i] === 201);
      expect(created.length).toBeGreaterThanOrEqual(FIRST_CALLS - 3);
      const committed = await db.dataSource.query(
        `SELECT ref FROM ledger WHERE route = $1 AND ref = ANY($2)`,
        [route, refs],
      );
      expect(committed.map((r: { ref: string }) => r.ref).sort()).toEqual(created.sort());
      // A refused request left its key free: sent again, alone, it runs and commits.
      const refused = refs.filter((_, i) => statuses[i] !== 201);
      for (const ref of refused) {
        const again = await send(url, `/ser/${route}`, { key: ref, body: { ref } });
        expect(again.status).toBe(201);
        expect(again.headers['idempotent-replayed']).toBeUndefined();
      }
      const retried = await db.dataSource.query(
        `SELECT count(*)::int AS n FROM ledger WHERE route = $1 AND ref = ANY($2)`,
        [route, refused],
      );
      expect(retried[0].n).toBe(refused.length);
    },
  );
});
