import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { queryWithin, StoreTimeoutError, type Pool } from '../../lib/store/postgres/pg-deadline.js';
import { DeadlinePool } from '../../lib/store/postgres/deadline-pool.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';
import { pipelineWithin } from '../../lib/store/postgres/pg-pipeline.js';

const TIMEOUT_MS = 100;
const select = { text: 'SELECT $1::int AS n', values: [7] };

/** A database behind a proxy that can stop answering, and a one-connection pool through it. */
function behindProxy(name: string) {
  const at = {} as { db: TestDatabase; proxy: TcpProxy; pool: pg.Pool };
  beforeAll(async () => {
    at.db = await createTestDatabase(name);
    at.proxy = TcpProxy.forUrl(at.db.url);
    await at.proxy.start();
    at.pool = new pg.Pool({ connectionString: at.proxy.wrap(at.db.url), max: 1 });
    at.pool.on('error', () => undefined);
  });
  afterAll(async () => {
    at.proxy?.resume();
    await at.pool?.end();
    await at.proxy?.stop();
    await at.db?.drop();
  });
  return at;
}

describe('DeadlinePool against a hanging PostgreSQL', () => {
  const at = behindProxy('pg_deadline');

  it('gives up on a hung query and a hung checkout, stops queueing past 100 abandoned checkouts, and recovers', async () => {
    const { proxy, pool } = at;
    const deadline = new DeadlinePool(() => pool as unknown as Pool, TIMEOUT_MS);
    // The pool's one connection opened first: on a loaded machine connecting alone can take most
    // of the 100 ms, and this first query is about a healthy database answering in time.
    await pool.query('SELECT 1');
    expect((await deadline.query(select)).rows).toEqual([{ n: 7 }]);

    proxy.blackhole();
    await expect(deadline.query(select)).rejects.toThrow(StoreTimeoutError);
    // The hung connection was not handed back: the pool's only slot now waits on a new connection.
    expect(pool.idleCount).toBe(0);

    const abandoned = await Promise.allSettled(
      Array.from({ length: 100 }, () => deadline.connect()),
    );
    expect(abandoned.every((r) => r.status === 'rejected')).toBe(true);
    // One of them is the pool's new connection attempt, the rest wait in its queue.
    const waiting = pool.waitingCount;
    expect(waiting).toBeGreaterThanOrEqual(99);
    const started = Date.now();
    await expect(deadline.query(select)).rejects.toThrow(/did not answer a connection request/);
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS / 2);
    expect(pool.waitingCount).toBe(waiting); // nothing more queued

    proxy.resume();
    const deadlineAt = Date.now() + 5_000;
    let result: unknown;
    while (Date.now() < deadlineAt && result === undefined) {
      result = await deadline.query(select).then(
        (r) => r.rows,
        () => new Promise((r) => setTimeout(r, 20)),
      );
    }
    expect(result).toEqual([{ n: 7 }]);
    expect(pool.waitingCount).toBe(0);
  });
});

describe('pipelineWithin against a hanging PostgreSQL (one deadline for the statements sent together)', () => {
  const at = behindProxy('pg_pipeline_deadline');

  const rowsOf = (settled: PromiseSettledResult<{ rows: unknown[] }>[]) =>
    settled.map((s) => (s.status === 'fulfilled' ? s.value.rows : s.reason));

  it('answers in time, then fails every statement of a hung pipeline with StoreTimeoutError and ends its connection', async () => {
    const { proxy, pool } = at;
    const client = await pool.connect();
    const errors: string[] = [];
    client.on('error', (err) => errors.push(err.message));
    const config = { ...select, name: 'pipeline_deadline_select' };
    // Longer than the hang below: a statement answered in time is not failed by a timer left over.
    const answered = await pipelineWithin(client, [config, select, config], TIMEOUT_MS * 3);
    expect(rowsOf(answered)).toEqual([[{ n: 7 }], [{ n: 7 }], [{ n: 7 }]]);
    await new Promise((r) => setTimeout(r, TIMEOUT_MS * 4));
    expect(rowsOf(await pipelineWithin(client, [config], TIMEOUT_MS))).toEqual([[{ n: 7 }]]);

    proxy.blackhole();
    const started = Date.now();
    const hung = await pipelineWithin(
      client,
      [{ text: 'BEGIN', values: [] }, config, select],
      TIMEOUT_MS,
    );
    const waited = Date.now() - started;
    expect(hung.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const s of hung)
      expect((s as PromiseRejectedResult).reason).toBeInstanceOf(StoreTimeoutError);
    expect(waited).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(waited).toBeLessThan(TIMEOUT_MS * 20);
    // The socket was destroyed: nothing more can be sent on it. The client was ended first, so
    // pg reports no unexpected loss to a listener on it (helper-87).
    await expect(client.query('SELECT 1')).rejects.toThrow();
    expect(errors).toEqual([]);
    client.release(new Error('hung'));
    proxy.resume();
    const again = await pool.connect();
    try {
      expect(rowsOf(await pipelineWithin(again, [config, select], TIMEOUT_MS * 3))).toEqual([
        [{ n: 7 }],
        [{ n: 7 }],
      ]);
    } finally {
      again.release();
    }
  });

  it("times each statement by pg's own timer, with the store's deadline, where the connection carries query_timeout", async () => {
    const { db, proxy } = at;
    const timed = new pg.Pool({
      connectionString: proxy.wrap(db.url),
      max: 1,
      query_timeout: TIMEOUT_MS,
    });
    timed.on('error', () => undefined);
    const client = await timed.connect();
    client.on('error', () => undefined);
    try {
      proxy.blackhole();
      const started = Date.now();
      const hung = await pipelineWithin(client, [select, select], TIMEOUT_MS * 3);
      // The store's deadline, not the connection's shorter one, as for a statement on its own.
      expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS * 3 - 5);
      expect(hung.map((s) => s.status)).toEqual(['rejected', 'rejected']);
      // The first statement's own timer fired; the socket it destroyed may fail the second
      // before that one's timer does (as before the shared deadline: either way the store
      // answers 503, and a completion's outcome is unknown).
      expect((hung[0] as PromiseRejectedResult).reason).toBeInstanceOf(StoreTimeoutError);
    } finally {
      proxy.resume();
      client.release(new Error('hung'));
      await timed.end();
    }
  });
});

/** The store takes any pool whose clients query as pg's do; not every one is pg's. */
describe('queryWithin on a client that is not pg', () => {
  it("gives up with StoreTimeoutError on a read timeout, whatever the client's end() returns", async () => {
    let ended = 0;
    const client = {
      query: () => Promise.reject(new Error('Query read timeout')),
      end: () => void ended++,
    };
    await expect(
      queryWithin(client as never, { ...select, name: 'idem_probe' }, TIMEOUT_MS),
    ).rejects.toThrow(StoreTimeoutError);
    expect(ended).toBe(1);
  });

  it('settles on what a query gives without a promise, and on a synchronous throw', async () => {
    const answered = { rows: [{ n: 7 }], rowCount: 1 };
    const plain = { query: () => answered };
    await expect(queryWithin(plain as never, select, TIMEOUT_MS)).resolves.toBe(answered);
    const throwing = {
      query: () => {
        throw new TypeError('not connected');
      },
    };
    await expect(queryWithin(throwing as never, select, TIMEOUT_MS)).rejects.toThrow(
      'not connected',
    );
  });
});
