import { AsyncLocalStorage } from 'node:async_hooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DeadlinePool } from '../../lib/store/postgres/deadline-pool.js';
import { StoreTimeoutError, type Pool } from '../../lib/store/postgres/pg-deadline.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';

const select = (n: number) => ({ text: 'SELECT $1::int AS n', values: [n] });

/** How a promise ends within `ms`: 'pending' if it did not. */
function within<T>(p: Promise<T>, ms: number): Promise<string> {
  return Promise.race([
    p.then(
      () => 'resolved',
      (err: Error) => `rejected: ${err?.constructor?.name}`,
    ),
    new Promise<string>((r) => setTimeout(() => r('pending'), ms).unref()),
  ]);
}

/**
 * A helper's attacks on a callback checkout (tried for speed, dropped: bench/README, twentieth
 * session); the first three failed on it. Kept: what any way of checking out must do.
 */
describe('DeadlinePool on an idle connection: subclassed pools, async context, hangs', () => {
  let db: TestDatabase;
  let pool: pg.Pool | undefined;
  beforeAll(async () => {
    db = await createTestDatabase('deadline_pool_attacks');
  });
  afterEach(async () => {
    // A leaked checkout keeps pool.end() from finishing: do not wait for it past 1 s.
    if (pool) await within(pool.end(), 1_000);
    pool = undefined;
  });
  afterAll(async () => {
    await db?.drop();
  });
  const warm = async (p: pg.Pool, n: number) => {
    const clients = await Promise.all(Array.from({ length: n }, () => p.connect()));
    for (const c of clients) c.release();
  };

  // A pg.Pool subclass whose connect() is promise-only (session setup on checkout).
  it('answers through a pg.Pool subclass whose connect() is promise-only, and leaks no connection', async () => {
    class SessionPool extends pg.Pool {
      override async connect(): Promise<any> {
        const client = await super.connect();
        await client.query("SET application_name = 'app'");
        return client;
      }
    }
    const p = new SessionPool({ connectionString: db.url, max: 2 });
    pool = p;
    p.on('error', () => undefined);
    await warm(p, 2);
    const deadline = new DeadlinePool(() => p as unknown as Pool, 1_000);
    // Fail closed at worst: a StoreTimeoutError within the deadline, never a hang.
    const outcome = await within(deadline.query(select(1)), 3_000);
    await new Promise((r) => setTimeout(r, 100));
    const counts = { idle: p.idleCount, total: p.totalCount };
    expect({ outcome, counts }).toEqual({ outcome: 'resolved', counts: { idle: 2, total: 2 } });
  });

  // pg-pool may hand a connection over from another caller's release(): the statement must still
  // run in its own caller's context.
  it("submits the statement in the caller's async context (what tracing and ALS logging see)", async () => {
    const als = new AsyncLocalStorage<string>();
    const seen: (string | undefined)[] = [];
    const original = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const first = args[0] as { text?: string };
      if (first?.text?.startsWith('SELECT $1::int')) seen.push(als.getStore());
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof original;
    try {
      const p = new pg.Pool({ connectionString: db.url, max: 2 });
      pool = p;
      p.on('error', () => undefined);
      await warm(p, 2);
      const deadline = new DeadlinePool(() => p as unknown as Pool, 2_000);
      const held = await p.connect(); // request B holds a connection; one idle left
      // Request A starts a statement, then in the same microtask drain B hands its connection back.
      const a = als.run('request A', async () => {
        await null;
        return deadline.query(select(1));
      });
      const b = als.run('request B', async () => {
        await null;
        await null;
        held.release();
      });
      await Promise.all([a, b]);
      expect(seen).toEqual(['request A']);
    } finally {
      pg.Client.prototype.query = original;
    }
  });

  it('fails closed with StoreTimeoutError within the deadline when PostgreSQL hangs (idle connection)', async () => {
    const proxy = TcpProxy.forUrl(db.url);
    await proxy.start();
    try {
      const p = new pg.Pool({ connectionString: proxy.wrap(db.url), max: 1 });
      pool = p;
      p.on('error', () => undefined);
      await warm(p, 1);
      const deadline = new DeadlinePool(() => p as unknown as Pool, 500);
      proxy.blackhole();
      const started = Date.now();
      await expect(deadline.query(select(1))).rejects.toThrow(StoreTimeoutError);
      const elapsed = Date.now() - started;
      // The 500 ms deadline and nothing earlier answered; nothing else would ever answer. The upper
      // bound only tells the deadline from none: a jest worker on a loaded 2-core CI machine was
      // seen to stall past 1.5 s (1 546 ms).
      expect(elapsed).toBeGreaterThanOrEqual(450);
      expect(elapsed).toBeLessThan(5_000);
      await new Promise((r) => setTimeout(r, 50));
      expect(p.totalCount).toBe(0); // the hung connection was removed, not handed back
    } finally {
      proxy.resume();
      await proxy.stop();
    }
  });

  it('answers on an idle connection of a pool with connectionTimeoutMillis and allowExitOnIdle', async () => {
    const p = new pg.Pool({
      connectionString: db.url,
      max: 2,
      connectionTimeoutMillis: 200,
      allowExitOnIdle: true,
    });
    pool = p;
    p.on('error', () => undefined);
    await warm(p, 2);
    const deadline = new DeadlinePool(() => p as unknown as Pool, 2_000);
    const rows = await Promise.all([1, 2].map((n) => deadline.query(select(n))));
    expect(rows.map((r) => r.rows[0].n)).toEqual([1, 2]);
    await new Promise((r) => setTimeout(r, 300)); // past connectionTimeoutMillis: no late callback
    expect({ idle: p.idleCount, total: p.totalCount }).toEqual({ idle: 2, total: 2 });
  });

  it('a backend terminated while idle: the next statement still answers', async () => {
    const p = new pg.Pool({ connectionString: db.url, max: 1 });
    pool = p;
    p.on('error', () => undefined);
    await warm(p, 1);
    const deadline = new DeadlinePool(() => p as unknown as Pool, 2_000);
    const { rows } = await deadline.query({ text: 'SELECT pg_backend_pid() AS pid', values: [] });
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
    await admin.end();
    await new Promise((r) => setTimeout(r, 100));
    expect((await deadline.query(select(5))).rows).toEqual([{ n: 5 }]);
  });
});
