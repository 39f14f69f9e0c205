import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  IdempotencyCleanupService,
  IdempotencyModule,
  type IdempotencyCleanupOptions,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

/** What finance reads for closed days must survive cleanup (issue 16.1). */
describe('finance history', () => {
  let db: MigratedDatabase;
  const q = (sql: string, params: unknown[] = []) => db.dataSource.query(sql, params);
  beforeAll(async () => {
    db = await createMigratedDatabase('finance');
  });
  afterAll(async () => db?.drop());
  beforeEach(async () =>
    q(
      `TRUNCATE idempotency_keys, idempotency_keys_archive, idempotency_keys_replays, idempotency_keys_cleanup_runs,
                idempotency_keys_daily_rollup, idempotency_keys_refusals`,
    ),
  );

  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
    close = undefined;
  });

  async function cleanup(options: IdempotencyCleanupOptions = {}) {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false, ...options },
        }),
      ],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    await app.init();
    close = () => app.close();
    return app.get(IdempotencyCleanupService).run();
  }

  /** A completed record created, completed and expired `days` ago (10:00 UTC that day). */
  const seedRecord = (table: string, days: number, status: number, endpoint = 'POST /payments') =>
    q(
      `WITH t AS (SELECT date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
                          - make_interval(days => $1) + interval '10 hours' AS at)
       INSERT INTO ${table} (id, idempotency_key, endpoint, user_id, request_hash, status, status_code,
                             created_at, completed_at, expires_at, replay_count)
       SELECT gen_random_uuid(), gen_random_uuid()::text, $3, '', repeat('a', 64), 'completed', $2,
              t.at, t.at + interval '1 minute', t.at + interval '2 hours', 0 FROM t
       RETURNING id, expires_at`,
      [days, status, endpoint],
    );
  const seedReplays = (recordId: string, expiresAt: Date, count: number) =>
    q(
      `INSERT INTO idempotency_keys_replays (record_id, replayed_at, first_replayed_at, expires_at, replay_count)
       VALUES ($1, $2::timestamptz - interval '30 minutes', $2::timestamptz - interval '40 minutes', $2, $3)`,
      [recordId, expiresAt, count],
    );
  /** Every view row of days before today: what finance already reported. */
  const closedDays = async () => ({
    summary: await q(
      `SELECT * FROM idempotency_keys_daily_summary
        WHERE day < (now() AT TIME ZONE 'UTC')::date ORDER BY day`,
    ),
    conflicts: await q(
      `SELECT * FROM idempotency_keys_conflicts_daily
        WHERE day < (now() AT TIME ZONE 'UTC')::date ORDER BY day`,
    ),
    failures: await q(
      `SELECT * FROM idempotency_keys_failures_daily
        WHERE day < (now() AT TIME ZONE 'UTC')::date ORDER BY day, endpoint, status_code`,
    ),
  });
  const count = async (table: string) =>
    (await q(`SELECT count(*)::int AS n FROM ${table}`))[0].n as number;

  it('keeps expired records, their archive and replay rows for 400 days by default', async () => {
    const [kept] = await seedRecord('idempotency_keys', 399, 201);
    await seedReplays(kept.id, kept.expires_at, 2);
    await seedRecord('idempotency_keys_archive', 2, 201);
    const [old] = await seedRecord('idempotency_keys', 402, 201);
    await seedReplays(old.id, old.expires_at, 1);
    expect(await cleanup()).toMatchObject({ ran: true, deleted: 1 });
    expect(await count('idempotency_keys')).toBe(1);
    expect(await count('idempotency_keys_archive')).toBe(1);
    expect(await count('idempotency_keys_replays')).toBe(1);
  });

  it('reports the same figures for a closed day after cleanup deleted its rows', async () => {
    for (const status of [201, 201, 402]) {
      const [record] = await seedRecord('idempotency_keys', 3, status);
      await seedReplays(record.id, record.expires_at, 2);
      await q(
        `INSERT INTO idempotency_keys_refusals (record_id, kind, refusal_count, first_refused_at, refused_at, expires_at)
         VALUES ($1, 'in_progress', 3, $2::timestamptz - interval '2 hours', $2::timestamptz - interval '2 hours', $2),
                ($1, 'mismatch', 1, $2::timestamptz - interval '1 hour', $2::timestamptz - interval '1 hour', $2)`,
        [record.id, record.expires_at],
      );
    }
    await seedRecord('idempotency_keys_archive', 3, 402, 'POST /refunds');
    await seedRecord('idempotency_keys', 1, 201);
    // A run logged 40 days ago: past the run log's own retention (30 days).
    await q(
      `INSERT INTO idempotency_keys_cleanup_runs (started_at, finished_at, deleted, batches)
       VALUES (now() - interval '40 days', now() - interval '40 days', 7, 1)`,
    );
    const before = await closedDays();
    expect(before.summary).toHaveLength(3);
    expect(before.summary[1]).toMatchObject({ created: 4, completed: 4, replayed: 6, expired: 4 });
    expect(before.failures).toHaveLength(2);
    expect(before.conflicts).toEqual([expect.objectContaining({ conflicts: 9, mismatches: 3 })]);

    expect(await cleanup({ retentionSeconds: 0 })).toMatchObject({ ran: true, deleted: 5 });
    expect(await count('idempotency_keys')).toBe(0);
    expect(await count('idempotency_keys_archive')).toBe(0);
    expect(await count('idempotency_keys_replays')).toBe(0);
    expect(await count('idempotency_keys_refusals')).toBe(0);
    expect(await count('idempotency_keys_cleanup_runs')).toBe(1); // only this run's
    expect(await closedDays()).toEqual(before);
    // A second run (nothing left to delete) changes nothing either.
    await close?.();
    await cleanup({ retentionSeconds: 0 });
    expect(await closedDays()).toEqual(before);
  });
});
