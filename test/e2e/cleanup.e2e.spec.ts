import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import pg from 'pg';
import {
  CLEANUP_JOB_NAME,
  IdempotencyCleanupService,
  IdempotencyModule,
  type IdempotencyCleanupOptions,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { LogCapture } from '../fixtures/log-capture.js';

describe('cleanup', () => {
  let db: MigratedDatabase;
  beforeAll(async () => {
    db = await createMigratedDatabase('cleanup');
  });
  afterAll(async () => db?.drop());
  beforeEach(async () => db.dataSource.query('TRUNCATE idempotency_keys'));

  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
    close = undefined;
  });

  async function boot(
    cleanup: IdempotencyCleanupOptions,
    schedule = false,
    logger: LogCapture | false = false,
  ) {
    @Module({
      imports: [
        // Deleting at expiry (not the finance default) keeps these tests short.
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { retentionSeconds: 0, ...cleanup },
        }),
        ...(schedule ? [ScheduleModule.forRoot()] : []),
      ],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger });
    await app.init();
    close = () => app.close();
    return app;
  }

  /** Seeds `count` rows: completed, or in progress with a live lease, expired `agoSeconds` ago. */
  const seed = (
    count: number,
    agoSeconds: number,
    status: 'completed' | 'in_progress' = 'completed',
  ) =>
    db.dataSource.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, locked_until, expires_at)
       SELECT 'k' || g || '-' || $3::text || '-' || $2::int::text, 'POST /p', repeat('a', 64), $3,
              CASE WHEN $3 = 'in_progress' THEN now() + interval '1 minute' END,
              now() - make_interval(secs => $2::int)
         FROM generate_series(1, $1) g`,
      [count, agoSeconds, status],
    );
  const count = async (where = 'true') =>
    (await db.dataSource.query(`SELECT count(*)::int AS n FROM idempotency_keys WHERE ${where}`))[0]
      .n;

  it('deletes expired rows in bounded batches and keeps live ones and running claims', async () => {
    await seed(2_500, 60);
    await seed(10, -3_600);
    await seed(5, 60, 'in_progress');
    const app = await boot({ enabled: false, batchSize: 1_000 });
    const result = await app.get(IdempotencyCleanupService).run();
    // Three batches of records, then one (empty) batch each for the archive, replays, refusals
    // and recovery points.
    expect(result).toMatchObject({ ran: true, deleted: 2_500, batches: 7 });
    expect(result.longestBatchMs).toBeGreaterThanOrEqual(0);
    expect(await count()).toBe(15);
    expect(await count(`status = 'in_progress'`)).toBe(5);
  });

  it('keeps expired rows for the retention period', async () => {
    await seed(3, 600);
    await seed(4, 7_200);
    const app = await boot({ enabled: false, retentionSeconds: 3_600 });
    expect((await app.get(IdempotencyCleanupService).run()).deleted).toBe(4);
    expect(await count()).toBe(3);
  });

  it('does nothing while another instance holds the cleanup lock', async () => {
    await seed(5, 60);
    const app = await boot({ enabled: false });
    const other = new pg.Client({ connectionString: db.url });
    await other.connect();
    try {
      await other.query(`SELECT pg_advisory_lock(hashtextextended($1, 0))`, [
        'nestjs-pg-idempotency:cleanup:idempotency_keys',
      ]);
      expect(await app.get(IdempotencyCleanupService).run()).toMatchObject({
        ran: false,
        deleted: 0,
        batches: 0,
        longestBatchMs: 0,
      });
      expect(await count()).toBe(5);
      await other.query(`SELECT pg_advisory_unlock_all()`);
      expect((await app.get(IdempotencyCleanupService).run()).deleted).toBe(5);
    } finally {
      await other.end();
    }
  });

  it("registers its cron job with the app's SchedulerRegistry and runs on schedule", async () => {
    await seed(7, 60);
    const app = await boot({ cron: '* * * * * *' }, true);
    const job = app.get(SchedulerRegistry).getCronJob(CLEANUP_JOB_NAME);
    expect(job).toBeDefined();
    const deadline = Date.now() + 5_000;
    while ((await count()) > 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 200));
    expect(await count()).toBe(0);
  });

  it('logs at LOG level only when a run deleted something, else at DEBUG', async () => {
    const logs = new LogCapture();
    const app = await boot({ enabled: false }, false, logs);
    const cleanup = app.get(IdempotencyCleanupService);
    expect((await cleanup.run()).deleted).toBe(0);
    expect(logs.of('IdempotencyCleanup', 'log')).toEqual([]);
    expect(logs.of('IdempotencyCleanup', 'debug').map((l) => l.message)).toEqual([
      expect.stringMatching(/^Deleted 0 expired idempotency records/),
    ]);
    await seed(3, 60);
    expect((await cleanup.run()).deleted).toBe(3);
    expect(logs.of('IdempotencyCleanup', 'log').map((l) => l.message)).toEqual([
      expect.stringMatching(/^Deleted 3 expired idempotency records/),
    ]);
  });

  describe('the log of cleanup runs', () => {
    beforeEach(async () => db.dataSource.query('TRUNCATE idempotency_keys_cleanup_runs'));
    /** A past run, finished `days` ago; returns its id. */
    const pastRun = async (days: number) =>
      (
        await db.dataSource.query(
          `INSERT INTO idempotency_keys_cleanup_runs (started_at, finished_at, deleted, batches)
           VALUES (now() - make_interval(days => $1), now() - make_interval(days => $1), 1, 1)
           RETURNING id`,
          [days],
        )
      )[0].id as string;
    const runIds = async () =>
      (await db.dataSource.query('SELECT id FROM idempotency_keys_cleanup_runs ORDER BY id')).map(
        (r: { id: string }) => r.id,
      );

    it('keeps 30 days of runs by default, and deletes older ones', async () => {
      await pastRun(45);
      const recent = await pastRun(29);
      const app = await boot({ enabled: false });
      await app.get(IdempotencyCleanupService).run();
      const ids = await runIds();
      expect(ids).toHaveLength(2);
      expect(ids[0]).toBe(recent); // the 45-day-old run is gone; this run was added
    });

    it('keeps runs as long as records when retentionSeconds is longer', async () => {
      const old = await pastRun(45);
      await pastRun(70);
      const app = await boot({ enabled: false, retentionSeconds: 60 * 86_400 });
      await app.get(IdempotencyCleanupService).run();
      const ids = await runIds();
      expect(ids).toHaveLength(2);
      expect(ids[0]).toBe(old);
    });
  });

  it("never imports ScheduleModule itself: without the app's, no job is registered", async () => {
    const app = await boot({ cron: '* * * * * *' });
    expect(() => app.get(SchedulerRegistry, { strict: false })).toThrow();
  });
});
