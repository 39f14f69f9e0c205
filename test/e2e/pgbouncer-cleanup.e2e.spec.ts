/**
 * Cleanup's lock lives and dies with one transaction, so it holds behind a transaction pooler:
 * two instances through PgBouncer (transaction mode, one server connection) never clean at
 * once and neither is skipped forever; runs skipped again and again are logged at WARN; the run
 * log's times come from the database.
 */
import {
  afterAll,
  afterEach,
  beforeAll,
  beforeEach,
  describe,
  expect,
  it,
  jest,
} from '@jest/globals';
import { Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import pg from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import { IdempotencyCleanupService, IdempotencyModule } from '../../lib/index.js';
import { LogCapture } from '../fixtures/log-capture.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { startPgBouncer, type PgBouncer } from '../fixtures/pgbouncer.js';

const LOCK = 'nestjs-pg-idempotency:cleanup:idempotency_keys';

describe('cleanup lock', () => {
  let db: MigratedDatabase;
  const contexts: INestApplicationContext[] = [];
  beforeAll(async () => {
    db = await createMigratedDatabase('pgb_cleanup');
  });
  beforeEach(async () => {
    await db.dataSource.query('TRUNCATE idempotency_keys, idempotency_keys_cleanup_runs');
  });
  afterEach(async () => {
    for (const c of contexts.splice(0)) await c.close();
  });
  afterAll(async () => db?.drop());

  async function instance(dataSource: DataSource, logger: LogCapture | false = false) {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource,
          preparedStatements: false,
          cleanup: { enabled: false, batchSize: 50, retentionSeconds: 0 },
        }),
      ],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger });
    await app.init();
    contexts.push(app);
    return app.get(IdempotencyCleanupService);
  }

  const seed = (count: number) =>
    db.dataSource.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, expires_at)
       SELECT 'k' || g || '-' || gen_random_uuid(), 'POST /p', repeat('a', 64), 'completed', now() - interval '1 hour'
         FROM generate_series(1, $1::int) g`,
      [count],
    );

  it('two instances behind PgBouncer (transaction mode, pool size 1) never clean at once; none is skipped forever', async () => {
    const bouncer: PgBouncer = await startPgBouncer({
      poolMode: 'transaction',
      defaultPoolSize: 1,
    });
    try {
      const through = () =>
        new DataSource({ type: 'postgres', url: bouncer.url(db.name), extra: { max: 3 } });
      const [a, b] = [await instance(through()), await instance(through())];
      let deleted = 0;
      for (let round = 0; round < 5; round++) {
        await seed(500);
        const results = await Promise.all([a.run(), b.run()]);
        expect(results.some((r) => r.ran)).toBe(true);
        deleted += results.reduce((n, r) => n + r.deleted, 0);
      }
      expect(deleted).toBe(5 * 500);
      const overlaps = await db.dataSource.query(
        `SELECT x.id, y.id FROM idempotency_keys_cleanup_runs x JOIN idempotency_keys_cleanup_runs y
           ON x.id < y.id AND x.started_at < y.finished_at AND y.started_at < x.finished_at`,
      );
      expect(overlaps).toEqual([]);
      // The lock went with each run's transaction: each instance, alone, cleans.
      expect((await a.run()).ran).toBe(true);
      expect((await b.run()).ran).toBe(true);
      expect(bouncer.log()).not.toMatch(/don't own a lock/);
    } finally {
      for (const c of contexts.splice(0)) await c.close();
      await bouncer.stop();
    }
  });

  it('warns once runs were skipped three times in a row with nobody cleaning meanwhile', async () => {
    const logs = new LogCapture();
    const cleanup = await instance(db.newDataSource(), logs);
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    const warnings = () => logs.of('IdempotencyCleanup', 'warn').map((l) => l.message);
    try {
      await holder.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [LOCK]);
      // The skip and run stamps reach the app as Dates (milliseconds): on a fast machine a run
      // recorded right after a skip can share its millisecond and look simultaneous. Real runs
      // are minutes apart; here each step waits 3 ms so the order of the stamps is the order of
      // the steps.
      const skip = async () => {
        await sleep(3);
        const result = await cleanup.run();
        await sleep(3);
        return result;
      };
      // Another instance that cleans between the skips is the normal case: no warning.
      for (let i = 0; i < 3; i++) {
        expect((await skip()).ran).toBe(false);
        await db.dataSource.query(
          `INSERT INTO idempotency_keys_cleanup_runs (started_at, finished_at, deleted, batches)
           VALUES (clock_timestamp(), clock_timestamp(), 0, 3)`,
        );
      }
      expect(warnings()).toEqual([]);
      for (let i = 0; i < 2; i++) expect((await skip()).ran).toBe(false);
      expect(warnings()).toEqual([]);
      expect((await skip()).ran).toBe(false);
      expect(warnings()).toEqual([expect.stringMatching(/skipped 3 runs in a row/)]);
      await holder.query('SELECT pg_advisory_unlock_all()');
      expect((await cleanup.run()).ran).toBe(true);
    } finally {
      await holder.end();
    }
  });

  it("records each run's start and end with the database's clock, not the app's", async () => {
    const cleanup = await instance(db.newDataSource());
    const [{ before }] = await db.dataSource.query('SELECT clock_timestamp() AS before');
    jest.useFakeTimers({
      now: new Date('2001-02-03T04:05:06Z'),
      doNotFake: [
        'hrtime',
        'nextTick',
        'performance',
        'queueMicrotask',
        'setImmediate',
        'clearImmediate',
        'setInterval',
        'clearInterval',
        'setTimeout',
        'clearTimeout',
      ],
    });
    try {
      await seed(120);
      expect((await cleanup.run()).ran).toBe(true);
    } finally {
      jest.useRealTimers();
    }
    const [run] = await db.dataSource.query(
      `SELECT started_at >= $1 AS started_late_enough, started_at <= finished_at AS ordered,
              finished_at <= clock_timestamp() AS finished_in_past
         FROM idempotency_keys_cleanup_runs`,
      [before],
    );
    expect(run).toEqual({ started_late_enough: true, ordered: true, finished_in_past: true });
  });
});
