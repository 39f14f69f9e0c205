/**
 * A failover under load: two app processes (single-commit payments route) talk to a primary with
 * a synchronous streaming standby through one TCP front end. Mid-stream the primary is killed
 * (`pg_ctl stop -m immediate`), the standby promoted and the front end pointed at it; clients
 * retry every key until it answers 201. With `synchronous_standby_names` set, a commit the app saw
 * is on the standby: no key may be lost (every answer of a key is the bytes of one execution) and
 * none may run twice (one committed execution row per key on the surviving server).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { startFailoverCluster, type FailoverCluster } from '../fixtures/failover-cluster.js';
import { send } from '../fixtures/http-client.js';
import {
  buildChildApp,
  EXECUTIONS_TABLE,
  killChildApps,
  runPool,
  shuffled,
  sleep,
  startChildApp,
  tally,
  type ChildApp,
} from './support.js';

const KEYS = 150;
const REQUESTS_PER_KEY = 3;
const CONCURRENCY = 24;
const HANDLER_MS = 20;
/** The primary dies once this many requests have been answered 201. */
const KILL_AFTER = 150;
/** How long the standby's WAL stream stalls before the primary dies. */
const STALL_MS = 500;
/** How long one client keeps retrying its key. */
const RETRY_FOR_MS = 60_000;

interface Attempt {
  status: number;
  label: string;
  body: Buffer;
  replayed: boolean;
}

describe('failover under load with synchronous replication (two instances, single-commit)', () => {
  let cluster: FailoverCluster;
  let instances: ChildApp[] = [];

  beforeAll(async () => {
    const [script, created] = await Promise.all([
      buildChildApp('failover'),
      startFailoverCluster('load', { synchronous: true, extraTables: [EXECUTIONS_TABLE] }),
    ]);
    cluster = created;
    instances = await Promise.all(
      ['a', 'b'].map((instance) =>
        startChildApp({
          script,
          databaseUrl: cluster.url,
          instance,
          handlerMs: HANDLER_MS,
          mode: 'single',
        }),
      ),
    );
  }, 200_000);
  afterAll(async () => {
    await killChildApps();
    await cluster?.remove();
  }, 60_000);

  /** One client's request for `key`, retried until 201 (or RETRY_FOR_MS). */
  const pay = async (instance: ChildApp, key: string): Promise<Attempt[]> => {
    const attempts: Attempt[] = [];
    const deadline = Date.now() + RETRY_FOR_MS;
    for (;;) {
      let attempt: Attempt;
      try {
        const res = await send(instance.url, '/charges', { key, body: { amount: 500 } });
        const problem = (res.headers['content-type'] ?? '').includes('problem+json');
        attempt = {
          status: res.status,
          label: `${res.status}${problem ? ` ${res.json().code}` : ''}`,
          body: res.body,
          replayed: res.headers['idempotent-replayed'] === 'true',
        };
      } catch (error) {
        attempt = {
          status: 0,
          label: (error as Error).message,
          body: Buffer.alloc(0),
          replayed: false,
        };
      }
      attempts.push(attempt);
      if (attempt.status === 201 || Date.now() > deadline) return attempts;
      await sleep(100);
    }
  };

  it('loses no acknowledged key and runs none twice', async () => {
    const keys = Array.from({ length: KEYS }, () => randomUUID());
    const stream = shuffled(
      keys.flatMap((key) => Array.from({ length: REQUESTS_PER_KEY }, () => key)),
      20261203,
    );
    let acknowledged = 0;
    let failover: Promise<number> | undefined;
    const acked = new Set<string>();
    let ackedBeforeKill = 0;
    const results = await runPool(stream, CONCURRENCY, async (key, index) => {
      const attempts = await pay(instances[index % 2], key);
      if (attempts.at(-1)?.status === 201) acked.add(key);
      if (attempts.at(-1)?.status === 201 && ++acknowledged >= KILL_AFTER && !failover) {
        ackedBeforeKill = acked.size;
        const started = performance.now();
        // The standby falls behind first (its WAL stream stalls), as a loaded or distant one
        // would: what the primary commits meanwhile is only safe if commits wait for it.
        cluster.replication.blackhole();
        failover = sleep(STALL_MS)
          .then(() => cluster.failover())
          .then(() => performance.now() - started);
      }
      return { key, attempts };
    });
    const failoverMs = await failover;
    expect(failoverMs).toBeDefined();

    const violations: string[] = [];
    const bodies = new Map<string, Buffer>();
    for (const { key, attempts } of results) {
      const last = attempts.at(-1)!;
      if (last.status !== 201) violations.push(`${key}: no 201 after retries (${last.label})`);
      const first = bodies.get(key);
      if (last.status === 201 && first && !first.equals(last.body))
        violations.push(`${key}: two different 201 answers (an acknowledged run was lost)`);
      if (last.status === 201 && !first) bodies.set(key, last.body);
    }
    const rows = await cluster
      .current()
      .query<{ key: string; runs: number }>(
        `SELECT idempotency_key AS key, count(*)::int AS runs FROM reliability_executions GROUP BY 1`,
        [],
        'payments',
      );
    const runs = new Map(rows.map((r) => [r.key, r.runs]));
    for (const key of keys) {
      if ((runs.get(key) ?? 0) !== 1) violations.push(`${key}: ${runs.get(key) ?? 0} executions`);
    }
    const records = await cluster
      .current()
      .query<{ n: number }>(
        `SELECT count(*)::int AS n FROM idempotency_keys WHERE status = 'completed'`,
        [],
        'payments',
      );
    expect(violations).toEqual([]);
    expect(records[0].n).toBe(KEYS);

    // The failover happened under load: requests failed while it ran, and were retried.
    const all = results.flatMap((r) => r.attempts);
    const failed = all.filter((a) => a.status !== 201);
    expect(failed.length).toBeGreaterThan(0);
    console.log(
      [
        `[failover] ${stream.length} clients over ${KEYS} keys, 2 instances, concurrency ${CONCURRENCY}, handler ${HANDLER_MS} ms; standby stalled after ${KILL_AFTER} acknowledged (${ackedBeforeKill} keys), then ${STALL_MS} ms stall + kill + promote + retarget ${Math.round(failoverMs!)} ms`,
        `[failover] ${all.length} requests: ${JSON.stringify(tally(all.map((a) => (a.status === 201 ? (a.replayed ? '201 replay' : '201 first') : a.label))))}`,
        `[failover] executions per key on the new primary: ${JSON.stringify(tally(keys.map((k) => String(runs.get(k) ?? 0))))}; completed records ${records[0].n}`,
      ].join('\n'),
    );
  }, 180_000);
});
