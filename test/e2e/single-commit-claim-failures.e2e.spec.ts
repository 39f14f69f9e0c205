/**
 * The single-commit claim (BEGIN + advisory lock + lookup, pipelined under one deadline timer): a
 * database that stops answering, a lookup blocked server-side, its backend terminated
 * mid-pipeline, the server's statement_timeout, a pool with query_timeout, a read-only database,
 * and a store method replaced after the first claim. Each answers 503 without running the handler
 * and leaves the pool healthy. (helper-87's attack on the shared pipeline deadline.)
 */
import { describe, expect, it, jest } from '@jest/globals';
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import { IDEMPOTENCY_STORE, type IdempotencyStore } from '../../lib/index.js';
import { send, type RawResponse } from '../fixtures/http-client.js';
import { ledgerApp, ledgerAppSuite, ledgerRows } from '../fixtures/ledger-app.js';

const T = 800;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ledger = ledgerApp(T);
const { runs } = ledger;

describe('single-commit claim pipeline: a hung, blocked or terminated lookup', () => {
  const at = ledgerAppSuite('single_commit_claim', ledger, { proxied: true });
  const rows = (ref: string) => ledgerRows(at.db, ref);
  const timed = async (p: Promise<RawResponse>) => {
    const started = Date.now();
    const res = await p;
    return { res, ms: Date.now() - started };
  };
  /** No connection of the app stays open in a transaction (the advisory lock would stay held). */
  const appTxOpen = async () =>
    (
      await at.db.dataSource.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()
            AND state LIKE 'idle in transaction%'`,
      )
    )[0].n as number;

  /** Holds an ACCESS EXCLUSIVE lock on the records table, so the claim's lookup waits on it. */
  async function lockTable() {
    const c = new pg.Client({ connectionString: at.db.url });
    await c.connect();
    await c.query('BEGIN');
    await c.query('LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE');
    return {
      release: async () => {
        await c.query('ROLLBACK');
        await c.end();
      },
    };
  }
  const waitingLookup = async () => {
    for (let i = 0; i < 200; i++) {
      const rows = await at.db.dataSource.query(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
            AND wait_event_type = 'Lock' AND query LIKE '%idempotency_keys%' AND query NOT LIKE 'LOCK%'`,
      );
      if (rows.length) return rows[0].pid as number;
      await sleep(10);
    }
    throw new Error('no lookup waiting on the lock');
  };

  it('warms up: a first call commits and replays', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    expect((await send(at.app.url, '/pay', { key, body: { ref } })).status).toBe(201);
    const again = await send(at.app.url, '/pay', { key, body: { ref } });
    expect(again.headers['idempotent-replayed']).toBe('true');
  });

  it('blackholed during the claim: 503 within about statementTimeoutMs, nothing ran, recovers, a retry runs once', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    // resume() only after blackhole(): TcpProxy.resume() pipes again, a second resume doubles every byte.
    at.proxy.blackhole();
    const { res, ms } = await timed(send(at.app.url, '/pay', { key, body: { ref } }));
    expect({ status: res.status, code: res.json().code }).toEqual({
      status: 503,
      code: 'idempotency_store_unavailable',
    });
    expect(ms).toBeGreaterThanOrEqual(T - 50);
    expect(ms).toBeLessThan(T + 1_500);
    expect(runs.get(ref)).toBeUndefined();
    at.proxy.resume();
    await sleep(300);
    const retry = await send(at.app.url, '/pay', { key, body: { ref } });
    expect([201, 409]).toContain(retry.status);
    expect(runs.get(ref) ?? 0).toBeLessThanOrEqual(1);
    expect(await rows(ref)).toBe(runs.get(ref) ?? 0);
    const fresh = randomUUID();
    expect((await send(at.app.url, '/pay', { key: fresh, body: { ref: fresh } })).status).toBe(201);
    expect(at.unhandled).toEqual([]);
  });

  it('lookup blocked on a table lock (server alive): 503 within about statementTimeoutMs, no transaction left open, retry runs once', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const lock = await lockTable();
    let out: { res: RawResponse; ms: number };
    try {
      const pend = timed(send(at.app.url, '/pay', { key, body: { ref } }));
      out = await pend;
    } finally {
      await lock.release();
    }
    expect({ status: out.res.status, body: out.res.text }).toMatchObject({ status: 503 });
    expect(out.ms).toBeLessThan(T + 1_500);
    expect(runs.get(ref)).toBeUndefined();
    await sleep(300);
    expect(await appTxOpen()).toBe(0);
    const retry = await send(at.app.url, '/pay', { key, body: { ref } });
    expect(retry.status).toBe(201);
    expect(runs.get(ref)).toBe(1);
    expect(await rows(ref)).toBe(1);
    expect(at.unhandled).toEqual([]);
  });

  it("the claim's backend terminated mid-pipeline: answers at once (well before the deadline) with 503, nothing ran", async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const lock = await lockTable();
    let out: { res: RawResponse; ms: number };
    let killedAt: number;
    try {
      const pending = timed(send(at.app.url, '/pay', { key, body: { ref } }));
      const pid = await waitingLookup();
      killedAt = Date.now();
      await at.db.dataSource.query('SELECT pg_terminate_backend($1)', [pid]);
      out = await pending;
    } finally {
      await lock.release();
    }
    const sinceKill = Date.now() - killedAt;
    expect({ status: out.res.status, fast: sinceKill < T / 2 }).toEqual({
      status: 503,
      fast: true,
    });
    expect(runs.get(ref)).toBeUndefined();
    const retry = await send(at.app.url, '/pay', { key, body: { ref } });
    expect(retry.status).toBe(201);
    expect(runs.get(ref)).toBe(1);
    expect(at.unhandled).toEqual([]);
  });

  it('the pool is healthy afterwards: as many concurrent claims as it has connections all commit', async () => {
    const keys = Array.from({ length: 4 }, () => randomUUID());
    const out = await Promise.all(
      keys.map((key) => send(at.app.url, '/pay', { key, body: { ref: key } })),
    );
    expect(out.map((r) => [r.status, r.status === 201 ? '' : r.text])).toEqual(
      keys.map(() => [201, '']),
    );
    expect(at.pool.waitingCount).toBe(0);
    expect(at.unhandled).toEqual([]);
  });
});

describe.each([
  [
    'statement_timeout 200 ms on the connection (server cancels the lookup)',
    { statement_timeout: 200 },
  ],
  ['query_timeout 100 ms on the pool (per-statement pg timers)', { query_timeout: 100 }],
])('single-commit claim pipeline with %s', (_name, poolConfig) => {
  const at = ledgerAppSuite('single_commit_claim_to', ledger, {
    poolConfig: { max: 3, ...poolConfig },
  });

  it('a lookup blocked on a table lock answers 503 no later than about statementTimeoutMs; nothing ran; the retry commits once', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const c = new pg.Client({ connectionString: at.db.url });
    await c.connect();
    await c.query('BEGIN');
    await c.query('LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE');
    const started = Date.now();
    let res: RawResponse;
    try {
      res = await send(at.app.url, '/pay', { key, body: { ref } });
    } finally {
      await c.query('ROLLBACK');
      await c.end();
    }
    const ms = Date.now() - started;
    expect({ status: res.status, code: res.json().code }).toEqual({
      status: 503,
      code: 'idempotency_store_unavailable',
    });
    expect(ms).toBeLessThan(T + 1_000);
    expect(runs.get(ref)).toBeUndefined();
    await sleep(200);
    const retry = await send(at.app.url, '/pay', { key, body: { ref } });
    expect(retry.status).toBe(201);
    expect(runs.get(ref)).toBe(1);
    expect(at.unhandled).toEqual([]);
  });
});

describe('single-commit claim: a read-only database, a store method replaced at run time', () => {
  const at = ledgerAppSuite('single_commit_claim_edges', ledger, { poolConfig: { max: 3 } });

  it('a read-only database: 503 at once, nothing ran, no transaction left open; writable again, the retry commits once', async () => {
    const warm = randomUUID();
    expect((await send(at.app.url, '/pay', { key: warm, body: { ref: warm } })).status).toBe(201);
    // New sessions of this database start read-only; the pool's idle ones are replaced.
    await at.db.dataSource.query(
      `ALTER DATABASE "${at.db.name}" SET default_transaction_read_only = on`,
    );
    while (at.pool.idleCount) await (await at.pool.connect()).release(new Error('recycle'));
    const key = randomUUID();
    const ref = randomUUID();
    const started = Date.now();
    const res = await send(at.app.url, '/pay', { key, body: { ref } });
    const ms = Date.now() - started;
    expect({ status: res.status, fast: ms < T }).toEqual({ status: 503, fast: true });
    expect(runs.get(ref)).toBeUndefined();
    await sleep(200);
    expect(
      (
        await at.db.dataSource.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()
             AND state LIKE 'idle in transaction%'`,
        )
      )[0].n,
    ).toBe(0);
    await at.db.dataSource.query(
      `ALTER DATABASE "${at.db.name}" RESET default_transaction_read_only`,
    );
    while (at.pool.idleCount) await (await at.pool.connect()).release(new Error('recycle'));
    const retry = await send(at.app.url, '/pay', { key, body: { ref } });
    expect(retry.status).toBe(201);
    expect(runs.get(ref)).toBe(1);
    expect(at.unhandled).toEqual([]);
  });

  it("a spy put on the store's claimInTransaction after the first single-commit call is used (fault injection: 503, nothing ran)", async () => {
    const store = at.app.app.get<IdempotencyStore>(IDEMPOTENCY_STORE);
    const first = randomUUID();
    expect((await send(at.app.url, '/pay', { key: first, body: { ref: first } })).status).toBe(201);
    const spy = jest
      .spyOn(store as Required<IdempotencyStore>, 'claimInTransaction')
      .mockRejectedValue(new Error('injected: PostgreSQL unavailable'));
    try {
      const key = randomUUID();
      const res = await send(at.app.url, '/pay', { key, body: { ref: key } });
      expect({ status: res.status, calls: spy.mock.calls.length, ran: runs.get(key) ?? 0 }).toEqual(
        {
          status: 503,
          calls: 1,
          ran: 0,
        },
      );
    } finally {
      spy.mockRestore();
    }
  });
});
