/**
 * Cleanup of a large backlog (200 000 expired records) while claims go on through HTTP: no
 * deadlock, no error, every claim answered 201, every expired row gone and every live one kept.
 * Claim latency (idle vs during cleanup) and the cleanup statements' durations are measured and
 * printed, not asserted: performance is reported, never asserted with timers in tests.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { IdempotencyCleanupService } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { startFixtureApp, type FixtureApp } from '../fixtures/payments.fixture.js';
import { latencySummary, percentile, tally } from './support.js';

const EXPIRED = 200_000;
const LIVE_COMPLETED = 1_000;
const LIVE_CLAIMS = 50;
const BATCH_SIZE = 5_000; // the default, spelled out because the batch count is asserted
const CLAIM_CONCURRENCY = 4;
const IDLE_MS = 3_000;

interface StatementTiming {
  table: string;
  ms: number;
  rows: number;
}

/**
 * Times every cleanup `DELETE` the store sends. The store checks a client out of the DataSource's
 * pg pool (`pool.connect()` without a callback) for the whole run; claims go through
 * `pool.query`, which checks out with a callback and is left alone.
 */
function timeCleanupStatements(dataSource: DataSource): StatementTiming[] {
  const timings: StatementTiming[] = [];
  const pool = (dataSource.driver as any).master;
  const connect = pool.connect.bind(pool);
  const wrapped = new WeakSet<object>();
  pool.connect = (...args: unknown[]) => {
    if (args.length > 0) return connect(...args);
    return connect().then((client: any) => {
      if (wrapped.has(client)) return client;
      wrapped.add(client);
      const query = client.query.bind(client);
      client.query = (config: any, ...rest: unknown[]) => {
        const text: unknown = typeof config === 'string' ? config : config?.text;
        // Each batch deletes and rolls its figures up in one statement (WITH g AS (DELETE ...)).
        const deleting = typeof text === 'string' ? /DELETE FROM (\S+)/.exec(text) : null;
        if (!deleting) return query(config, ...rest);
        const startedAt = performance.now();
        return query(config, ...rest).then((result: { rows: { deleted?: number }[] }) => {
          timings.push({
            table: deleting[1],
            ms: performance.now() - startedAt,
            rows: result.rows[0]?.deleted ?? 0,
          });
          return result;
        });
      };
      return client;
    });
  };
  return timings;
}

describe('cleanup of a 200 000-row backlog while claims go on', () => {
  let db: MigratedDatabase;
  let f: FixtureApp;
  let timings: StatementTiming[];
  let seedMs = 0;

  beforeAll(async () => {
    db = await createMigratedDatabase('rel_cleanup_backlog');
    const seedStartedAt = performance.now();
    // One INSERT ... SELECT generate_series: expired completed records with realistic payloads,
    // spread over an hour of expiry, as a backlog left by a stopped cleanup job would be.
    await db.dataSource.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, user_id, request_hash, status, status_code,
              response_headers, response_body, response_raw, transaction_id, created_at, completed_at, expires_at)
       SELECT 'expired-' || g, 'POST /charges', 'user_' || (g % 5000), repeat(md5(g::text), 2), 'completed', 201,
              '{"content-type":"application/json; charset=utf-8"}',
              jsonb_build_object('id', 'ch_' || g, 'amount', g % 10000),
              convert_to(jsonb_build_object('id', 'ch_' || g, 'amount', g % 10000)::text, 'UTF8'),
              'ch_' || g,
              now() - interval '2 days', now() - interval '2 days',
              now() - interval '1 day' - make_interval(secs => g % 3600)
         FROM generate_series(1, $1::int) g`,
      [EXPIRED],
    );
    // Live records (not expired) and running claims past expires_at but within their lease: kept.
    await db.dataSource.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, status_code, response_raw,
              completed_at, expires_at)
       SELECT 'live-' || g, 'POST /charges', repeat('b', 64), 'completed', 201, '\\x7b7d', now(), now() + interval '1 day'
         FROM generate_series(1, $1::int) g`,
      [LIVE_COMPLETED],
    );
    await db.dataSource.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, owner_token, locked_until, expires_at)
       SELECT 'running-' || g, 'POST /charges', repeat('c', 64), 'in_progress', gen_random_uuid(),
              now() + interval '10 minutes', now() - interval '1 hour'
         FROM generate_series(1, $1::int) g`,
      [LIVE_CLAIMS],
    );
    await db.dataSource.query('ANALYZE idempotency_keys');
    seedMs = performance.now() - seedStartedAt;

    const dataSource = db.newDataSource({ applicationName: 'reliability-cleanup-app' });
    f = await startFixtureApp({
      platform: 'express',
      dataSource,
      options: { cleanup: { enabled: false, batchSize: BATCH_SIZE, retentionSeconds: 0 } },
    });
    timings = timeCleanupStatements(dataSource);
  }, 60_000);
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  }, 30_000);

  const count = async (where: string) =>
    (await db.dataSource.query(`SELECT count(*)::int AS n FROM idempotency_keys WHERE ${where}`))[0]
      .n as number;
  const deadlocks = async () =>
    Number(
      (
        await db.dataSource.query(
          `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`,
        )
      )[0].deadlocks,
    );

  interface Claim {
    key: string;
    status: number;
    replayed: boolean;
    ms: number;
  }
  /** First-call claims through HTTP, `CLAIM_CONCURRENCY` at a time, until `until()` says stop. */
  async function claimLoop(until: () => boolean): Promise<Claim[]> {
    const claims: Claim[] = [];
    const lane = async () => {
      while (!until()) {
        const key = randomUUID();
        const startedAt = performance.now();
        const res = await send(f.url, '/charges', { key, body: { amount: 100, key } });
        claims.push({
          key,
          status: res.status,
          replayed: res.headers['idempotent-replayed'] === 'true',
          ms: performance.now() - startedAt,
        });
      }
    };
    await Promise.all(Array.from({ length: CLAIM_CONCURRENCY }, lane));
    return claims;
  }

  it('deletes every expired row without deadlock or error while every claim succeeds', async () => {
    const deadlocksBefore = await deadlocks();

    // Idle: the same loop, no cleanup.
    const idleUntil = performance.now() + IDLE_MS;
    const idle = await claimLoop(() => performance.now() >= idleUntil);

    // During cleanup: the loop runs until run() settles.
    let cleanupDone = false;
    const cleanupStartedAt = performance.now();
    const cleanup = f.app
      .get(IdempotencyCleanupService)
      .run()
      .finally(() => (cleanupDone = true));
    const [during, result] = await Promise.all([claimLoop(() => cleanupDone), cleanup]);
    const cleanupMs = performance.now() - cleanupStartedAt;

    // Correctness: the whole backlog went, in bounded batches; nothing live was touched.
    expect(result).toMatchObject({
      ran: true,
      deleted: EXPIRED,
      // 40 full batches and one short one of records, then one (empty) each for archive, replays,
      // refusals and orphaned recovery steps.
      batches: Math.ceil(EXPIRED / BATCH_SIZE) + 1 + 4,
    });
    expect(await count(`idempotency_key LIKE 'expired-%'`)).toBe(0);
    expect(await count(`idempotency_key LIKE 'live-%' AND status = 'completed'`)).toBe(
      LIVE_COMPLETED,
    );
    expect(await count(`idempotency_key LIKE 'running-%' AND status = 'in_progress'`)).toBe(
      LIVE_CLAIMS,
    );
    const runs = await db.dataSource.query(
      `SELECT deleted, batches FROM idempotency_keys_cleanup_runs`,
    );
    expect(runs).toEqual([{ deleted: EXPIRED, batches: result.batches }]);

    // Every claim, idle or during the cleanup, was a first call answered 201 and stored.
    const claims = [...idle, ...during];
    expect(tally(claims.map((c) => `${c.status}${c.replayed ? ' replay' : ''}`))).toEqual({
      '201': claims.length,
    });
    expect(during.length).toBeGreaterThanOrEqual(CLAIM_CONCURRENCY);
    const [stored] = await db.dataSource.query(
      `SELECT count(*)::int AS n FROM idempotency_keys WHERE idempotency_key = ANY($1) AND status = 'completed'`,
      [claims.map((c) => c.key)],
    );
    expect(stored.n).toBe(claims.length);
    for (const c of claims) expect(f.exec.count('charge', c.key)).toBe(1);

    // No deadlock (a deadlock would also have failed a claim or the run, both checked above).
    const deadlocksDuring = (await deadlocks()) - deadlocksBefore;
    expect(deadlocksDuring).toBe(0);

    const records = timings.filter((t) => t.table === '"idempotency_keys"');
    const longest = timings.reduce((a, b) => (b.ms > a.ms ? b : a));
    console.log(
      [
        `[cleanup-backlog] seeded ${EXPIRED} expired + ${LIVE_COMPLETED} live + ${LIVE_CLAIMS} running rows in ${Math.round(seedMs)} ms`,
        `[cleanup-backlog] run(): ${JSON.stringify(result)} in ${Math.round(cleanupMs)} ms`,
        `[cleanup-backlog] DELETE statements: ${timings.length}; records batches p50 ${percentile(
          records.map((t) => t.ms),
          50,
        ).toFixed(1)} ms, p99 ${percentile(
          records.map((t) => t.ms),
          99,
        ).toFixed(
          1,
        )} ms; longest ${longest.ms.toFixed(1)} ms (${longest.table}, ${longest.rows} rows)`,
        `[cleanup-backlog] claim latency (HTTP first call, concurrency ${CLAIM_CONCURRENCY}) idle:           ${latencySummary(idle.map((c) => c.ms))}`,
        `[cleanup-backlog] claim latency (HTTP first call, concurrency ${CLAIM_CONCURRENCY}) during cleanup: ${latencySummary(during.map((c) => c.ms))}`,
        `[cleanup-backlog] deadlocks during the run: ${deadlocksDuring}; all ${claims.length} claims 201`,
      ].join('\n'),
    );
  }, 60_000);
});
