/**
 * PostgreSQL "restarted" under load: while a stream of keyed requests runs, every backend of the
 * app's database is terminated (pg_terminate_backend), several times. The library must answer
 * 2xx (first run or replay), 409 or 503 (fail closed), never 500; no key may run twice (with the
 * default 60 s lease a failed completion keeps its claim for the whole test, so no takeover); and
 * the pool must recover by itself.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send, type RawResponse } from '../fixtures/http-client.js';
import {
  SINGLE_EXECUTIONS_TABLE,
  startFixtureApp,
  type FixtureApp,
} from '../fixtures/payments.fixture.js';
import { withAdminClient } from '../harness/test-database.js';
import { runPool, shuffled, sleep, tally } from './support.js';

/** Terminates the backends on `database` (only `applicationName`'s when given), idle or busy. */
function terminateBackends(database: string, applicationName?: string): Promise<number> {
  return withAdminClient(async (admin) => {
    const { rows } = await admin.query(
      `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n
         FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()
          AND ($2::text IS NULL OR application_name = $2)`,
      [database, applicationName ?? null],
    );
    return rows[0].n as number;
  });
}

const KEYS = 60;
const REQUESTS_PER_KEY = 5;
const CONCURRENCY = 16;
const HANDLER_MS = 50;
/** Request indexes at which every backend of the database is terminated. */
const TERMINATE_AT = [40, 90, 140, 190, 240];

interface Outcome {
  key: string;
  status: number;
  code?: string;
  replayed: boolean;
  body: Buffer;
}

describe('PostgreSQL restart (pg_terminate_backend) during a stream of keyed requests', () => {
  let db: MigratedDatabase;
  let f: FixtureApp;
  let poolErrors = 0;

  beforeAll(async () => {
    db = await createMigratedDatabase('rel_pg_restart');
    const dataSource = db.newDataSource({
      applicationName: 'reliability-pg-restart-app',
      poolErrorHandler: () => void poolErrors++,
    });
    f = await startFixtureApp({ platform: 'express', dataSource });
  }, 30_000);
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  }, 30_000);

  /** Like a restart: every backend on the app's database goes, idle or busy. */
  const terminateAll = () => terminateBackends(db.name);

  const call = async (key: string): Promise<Outcome> => {
    let res: RawResponse;
    try {
      res = await send(f.url, '/slow', { key, body: { ms: HANDLER_MS, key } });
    } catch (error) {
      return {
        key,
        status: 0,
        code: (error as Error).message,
        replayed: false,
        body: Buffer.alloc(0),
      };
    }
    const problem = (res.headers['content-type'] ?? '').includes('problem+json');
    return {
      key,
      status: res.status,
      code: problem ? res.json().code : undefined,
      replayed: res.headers['idempotent-replayed'] === 'true',
      body: res.body,
    };
  };

  const label = (o: Outcome) =>
    o.status === 201
      ? o.replayed
        ? '201 replay'
        : '201 first'
      : `${o.status} ${o.code ?? ''}`.trim();

  it('answers 2xx, 409 or 503 (never 500), runs no key twice, and recovers without a restart', async () => {
    const keys = Array.from({ length: KEYS }, () => randomUUID());
    const stream = shuffled(
      keys.flatMap((key) => Array.from({ length: REQUESTS_PER_KEY }, () => key)),
      20261202,
    );

    const terminations: Promise<number>[] = [];
    const startedAt = performance.now();
    const outcomes = await runPool(stream, CONCURRENCY, (key, index) => {
      if (TERMINATE_AT.includes(index)) terminations.push(terminateAll());
      return call(key);
    });
    const streamMs = performance.now() - startedAt;
    const terminated = await Promise.all(terminations);

    // The storm hit: backends were there to kill, while requests were in flight.
    expect(terminations).toHaveLength(TERMINATE_AT.length);
    expect(terminated.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);

    // Only the documented answers, each with its problem code.
    for (const o of outcomes) {
      if (o.status === 201) continue;
      expect({ status: o.status, code: o.code }).toEqual(
        o.status === 409
          ? { status: 409, code: 'request_in_progress' }
          : { status: 503, code: 'idempotency_store_unavailable' },
      );
    }

    // Per key: at most one execution; every 2xx is the bytes of that one execution.
    const rows = await db.records();
    const recordOf = new Map(rows.map((r) => [r.idempotency_key as string, r]));
    const violations: string[] = [];
    let completionFailures = 0;
    for (const key of keys) {
      const runs = f.exec.count('slow', key);
      const ok = outcomes.filter((o) => o.key === key && o.status === 201);
      const record = recordOf.get(key);
      if (runs > 1) violations.push(`${key}: handler ran ${runs} times`);
      if (ok.filter((o) => !o.replayed).length > runs)
        violations.push(`${key}: more first answers than runs`);
      if (ok.some((o) => !o.body.equals(ok[0].body))) violations.push(`${key}: 2xx bodies differ`);
      if (runs === 0 && ok.length > 0) violations.push(`${key}: 2xx without an execution`);
      if (record?.status === 'completed') {
        if (runs !== 1) violations.push(`${key}: completed with ${runs} runs`);
        if (ok.some((o) => !o.body.equals(record.response_raw)))
          violations.push(`${key}: stored bytes differ`);
      }
      if (runs === 1 && !record) violations.push(`${key}: ran, but its claim is gone`);
      if (runs === 1 && record?.status === 'in_progress') completionFailures++;
    }
    expect(violations).toEqual([]);

    // After the storm: no app restart, yet the pool serves again. Every key answers as its
    // record says (replay, 409 while a failed completion's claim holds its 60 s lease, or a first
    // run), and brand-new keys succeed on the first attempt.
    await sleep(200);
    const after = await runPool(keys, 8, call);
    // A completion retried in the background may land between the snapshot and these calls:
    // the answer may be what the record said then, or what it says once they are done.
    const laterOf = new Map((await db.records()).map((r) => [r.idempotency_key as string, r]));
    const expectedOf = (record: Record<string, unknown> | undefined) =>
      record?.status === 'completed'
        ? '201 replay'
        : record
          ? '409 request_in_progress'
          : '201 first';
    for (const o of after) {
      const record = recordOf.get(o.key);
      const later = laterOf.get(o.key);
      const expected = [expectedOf(record), expectedOf(later)];
      if (!expected.includes(label(o)))
        violations.push(`${o.key}: after the storm ${label(o)}, expected ${expected.join(' or ')}`);
      if (label(o) === '201 replay' && !o.body.equals(later?.response_raw as Buffer)) {
        violations.push(`${o.key}: replay after the storm is not the stored bytes`);
      }
      const first = outcomes.find((x) => x.key === o.key && x.status === 201);
      if (label(o) === '201 replay' && first && !o.body.equals(first.body)) {
        violations.push(`${o.key}: replay after the storm differs from the storm's 2xx`);
      }
      if (f.exec.count('slow', o.key) > 1) violations.push(`${o.key}: ran twice after the storm`);
    }
    expect(violations).toEqual([]);
    const fresh = await runPool(
      Array.from({ length: 20 }, () => randomUUID()),
      4,
      call,
    );
    expect(fresh.map(label)).toEqual(fresh.map(() => '201 first'));

    const orphanClaims = rows.filter(
      (r) => r.status === 'in_progress' && f.exec.count('slow', r.idempotency_key) === 0,
    ).length;
    console.log(
      [
        `[pg-restart] ${stream.length} requests over ${KEYS} keys, concurrency ${CONCURRENCY}, handler ${HANDLER_MS} ms, ${Math.round(streamMs)} ms`,
        `[pg-restart] terminations at requests ${TERMINATE_AT.join(', ')}: backends killed ${terminated.join(', ')}; pool errors seen ${poolErrors}`,
        `[pg-restart] answers during the storm: ${JSON.stringify(tally(outcomes.map(label)))}`,
        `[pg-restart] executions: ${keys.filter((k) => f.exec.count('slow', k) === 1).length} keys ran once, ${keys.filter((k) => f.exec.count('slow', k) > 1).length} ran twice or more; completion writes lost (kept in progress): ${completionFailures}; claims committed but answered 503: ${orphanClaims}`,
        `[pg-restart] answers after the storm: ${JSON.stringify(tally(after.map(label)))}; 20 new keys: ${JSON.stringify(tally(fresh.map(label)))}`,
      ].join('\n'),
    );
  }, 60_000);
});

/**
 * The same storm against a single-commit route (`transactional: 'single'`): a terminated backend
 * rolls back the claim with the handler's writes, so no claim is ever left in progress and a
 * retry may run again; what must hold is one COMMITTED run per key at most, and a completed
 * record exactly when that run committed.
 */
describe('PostgreSQL restart during a stream of keyed requests (single-commit)', () => {
  let db: MigratedDatabase;
  let f: FixtureApp;

  beforeAll(async () => {
    db = await createMigratedDatabase('rel_pg_restart_single');
    await db.dataSource.query(SINGLE_EXECUTIONS_TABLE);
    const dataSource = db.newDataSource({
      applicationName: 'reliability-pg-restart-app',
      poolErrorHandler: () => undefined,
    });
    f = await startFixtureApp({ platform: 'express', dataSource, singleCommit: true });
  }, 30_000);
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  }, 30_000);

  const terminateAll = () => terminateBackends(db.name, 'reliability-pg-restart-app');

  const call = async (key: string): Promise<Outcome> => {
    const res = await send(f.url, '/single/slow', { key, body: { ms: HANDLER_MS, key } });
    const problem = (res.headers['content-type'] ?? '').includes('problem+json');
    return {
      key,
      status: res.status,
      code: problem ? res.json().code : undefined,
      replayed: res.headers['idempotent-replayed'] === 'true',
      body: res.body,
    };
  };

  it('answers 2xx, 409 or 503 (never 500), commits no key twice, leaves no claim behind', async () => {
    const keys = Array.from({ length: KEYS }, () => randomUUID());
    const stream = shuffled(
      keys.flatMap((key) => Array.from({ length: REQUESTS_PER_KEY }, () => key)),
      20261203,
    );
    const terminations: Promise<number>[] = [];
    const outcomes = await runPool(stream, CONCURRENCY, (key, index) => {
      if (TERMINATE_AT.includes(index)) terminations.push(terminateAll());
      return call(key);
    });
    const terminated = await Promise.all(terminations);
    expect(terminated.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);

    for (const o of outcomes) {
      // A handler writing through the killed connection gets its query's error, but the request
      // answers 503: the session, and with it everything the handler wrote, is gone.
      if (o.status === 201) continue;
      expect({ status: o.status, code: o.code }).toEqual(
        o.status === 409
          ? { status: 409, code: 'request_in_progress' }
          : { status: 503, code: 'idempotency_store_unavailable' },
      );
    }

    const committed = new Map<string, number>(
      (
        await db.dataSource.query(
          `SELECT idempotency_key AS key, count(*)::int AS n FROM single_executions GROUP BY 1`,
        )
      ).map((r: { key: string; n: number }) => [r.key, r.n]),
    );
    const rows = await db.records();
    const recordOf = new Map(rows.map((r) => [r.idempotency_key as string, r]));
    const violations: string[] = [];
    for (const key of keys) {
      const runs = committed.get(key) ?? 0;
      const record = recordOf.get(key);
      const ok = outcomes.filter((o) => o.key === key && o.status === 201);
      if (runs > 1) violations.push(`${key}: committed ${runs} runs`);
      if (record && record.status !== 'completed') violations.push(`${key}: claim left behind`);
      if ((record ? 1 : 0) !== runs) violations.push(`${key}: record and committed runs differ`);
      if (ok.length > 0 && !record) violations.push(`${key}: 2xx without a record`);
      if (ok.some((o) => !o.body.equals(record?.response_raw)))
        violations.push(`${key}: 2xx not the stored bytes`);
    }
    expect(violations).toEqual([]);

    // After the storm: every key answers 201 (a replay, or its first committed run).
    await sleep(200);
    const after = await runPool(keys, 8, call);
    expect(after.map((o) => o.status)).toEqual(after.map(() => 201));
    const final = await db.dataSource.query(
      `SELECT count(*)::int AS n, count(DISTINCT idempotency_key)::int AS keys FROM single_executions`,
    );
    expect(final).toEqual([{ n: KEYS, keys: KEYS }]);
    console.log(
      `[pg-restart single-commit] killed ${terminated.join(', ')}; answers ${JSON.stringify(tally(outcomes.map((o) => `${o.status}${o.replayed ? ' replay' : ''}`)))}`,
    );
  }, 60_000);
});
