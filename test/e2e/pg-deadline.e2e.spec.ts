import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import {
  DeadlinePool,
  queryWithin,
  StoreTimeoutError,
  type Pool,
} from '../../lib/store/postgres/pg-deadline.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';

const TIMEOUT_MS = 100;
const select = { text: 'SELECT $1::int AS n', values: [7] };

describe('DeadlinePool against a hanging PostgreSQL', () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let pool: pg.Pool;
  beforeAll(async () => {
    db = await createTestDatabase('pg_deadline');
    proxy = TcpProxy.forUrl(db.url);
    await proxy.start();
    pool = new pg.Pool({ connectionString: proxy.wrap(db.url), max: 1 });
    pool.on('error', () => undefined);
  });
  afterAll(async () => {
    proxy?.resume();
    await pool?.end();
    await proxy?.stop();
    await db?.drop();
  });

  it('gives up on a hung query and a hung checkout, stops queueing past 100 abandoned checkouts, and recovers', async () => {
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
