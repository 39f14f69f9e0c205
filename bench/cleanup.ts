/**
 * `npm run bench:cleanup`: cleanup at scale while `first` traffic continues (not run in CI).
 * Fills idempotency_keys with BENCH_CLEANUP_EXPIRED expired rows (default 1 000 000) and
 * BENCH_CLEANUP_LIVE live ones (default 100 000), measures `first` against the `module` variant
 * idle, then again while cleanup runs, and reports rows deleted per second, the slowest single
 * DELETE, and the claim p99 during cleanup against the idle p99.
 */
import { DataSource } from 'typeorm';
import { IDEMPOTENCY_DEFAULTS, PostgresIdempotencyStore } from '../lib/index.js';
import { readConfig } from './config.js';
import { BenchDatabase } from './database.js';
import { prepareLoad } from './scenarios.js';
import { startVariant } from './servers.js';

const config = readConfig([]);
const EXPIRED = Number(process.env.BENCH_CLEANUP_EXPIRED ?? 1_000_000);
const LIVE = Number(process.env.BENCH_CLEANUP_LIVE ?? 100_000);
const BATCH = Number(process.env.BENCH_CLEANUP_BATCH ?? IDEMPOTENCY_DEFAULTS.cleanup.batchSize);

const db = await BenchDatabase.create(config.adminUrl);
const dataSource = new DataSource({ type: 'postgres', url: db.url });
try {
  await dataSource.initialize();
  const seed = (count: number, expires: string) =>
    dataSource.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, status_code,
              response_raw, expires_at, completed_at)
       SELECT 'seed-' || $2 || '-' || g, 'POST /payments', repeat('a', 64), 'completed', 201,
              '{"id":"pay"}'::bytea, ${expires}, now() - interval '2 days'
         FROM generate_series(1, $1::int) g`,
      [count, expires.includes('-') ? 'expired' : 'live'],
    );
  let t = performance.now();
  await seed(EXPIRED, `now() - interval '1 hour' - g * interval '1 millisecond'`);
  await seed(LIVE, `now() + interval '1 day'`);
  await dataSource.query('VACUUM ANALYZE idempotency_keys');
  console.log(
    `seeded ${EXPIRED} expired + ${LIVE} live rows in ${Math.round(performance.now() - t)} ms`,
  );

  const server = await startVariant('module', {
    DATABASE_URL: db.url,
    BENCH_POOL_SIZE: String(config.poolSize),
  });
  try {
    const load = await prepareLoad('first', server.url, config, 'cleanup');
    await load(config.warmup);
    const idle = await load(config.duration);

    const store = new PostgresIdempotencyStore(dataSource, 'idempotency_keys');
    t = performance.now();
    const cleaning = store.cleanup({ batchSize: BATCH, retentionSeconds: 0 }).then((result) => ({
      result,
      ms: performance.now() - t,
    }));
    // Keep the traffic going for as long as the cleanup runs, in slices of `duration`.
    const during = [];
    let done: Awaited<typeof cleaning> | undefined;
    void cleaning.then((d) => (done = d));
    do during.push(await load(Math.min(config.duration, 5)));
    while (!done);
    const { result, ms } = await cleaning;

    const p99 = (r: { result: { latency: { p99: number } } }[]) =>
      Math.max(...r.map((x) => x.result.latency.p99));
    const rps = (r: { result: { requests: { average: number } } }[]) =>
      r.reduce((a, x) => a + x.result.requests.average, 0) / r.length;
    const live = (
      await dataSource.query(
        `SELECT count(*)::int AS n FROM idempotency_keys WHERE expires_at > now()`,
      )
    )[0].n;
    const errors =
      during.reduce((a, x) => a + x.result.errors + x.result.non2xx, 0) +
      idle.result.errors +
      idle.result.non2xx;
    console.log(`
cleanup of ${result.deleted} expired rows (batch ${BATCH}, ${result.batches} statements) in ${(ms / 1000).toFixed(1)} s: ${Math.round(result.deleted / (ms / 1000))} rows/s
slowest single DELETE: ${result.longestBatchMs} ms
first (module) idle:           ${Math.round(rps([idle]))} req/s, p50 ${idle.result.latency.p50} ms, p99 ${idle.result.latency.p99} ms
first (module) during cleanup: ${Math.round(rps(during))} req/s, p99 ${p99(during)} ms (worst of ${during.length} slices)
claim p99 during / idle: ${(p99(during) / idle.result.latency.p99).toFixed(2)}x (target <= 2x); errors + non-2xx: ${errors}; live rows left: ${live} (expected >= ${LIVE})`);
  } finally {
    await server.stop();
  }
} finally {
  if (dataSource.isInitialized) await dataSource.destroy();
  await db.drop();
}
