import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { DeadlinePool } from '../../lib/store/postgres/deadline-pool.js';
import type { Pool, PoolClient } from '../../lib/store/postgres/pg-deadline.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';

const select = (n: number) => ({ text: 'SELECT $1::int AS n', values: [n] });

/**
 * What a store statement on pg's pool must do whatever way it checks a connection out (a callback
 * checkout was tried for speed and dropped: bench/README, twentieth session).
 */
describe('DeadlinePool statements on pg.Pool', () => {
  let db: TestDatabase;
  let pool: pg.Pool;
  beforeAll(async () => {
    db = await createTestDatabase('deadline_pool');
  });
  afterEach(async () => {
    await pool?.end().catch(() => undefined);
  });
  afterAll(async () => {
    await db?.drop();
  });
  const open = async (max: number) => {
    pool = new pg.Pool({ connectionString: db.url, max });
    pool.on('error', () => undefined);
    // Idle connections first: the path under test needs one per statement in flight.
    const clients = await Promise.all(Array.from({ length: max }, () => pool.connect()));
    for (const c of clients) c.release();
    return new DeadlinePool(() => pool as unknown as Pool, 5_000);
  };
  const counts = () => ({
    total: pool.totalCount,
    idle: pool.idleCount,
    waiting: pool.waitingCount,
  });

  it('answers and hands the connection back idle', async () => {
    const deadline = await open(2);
    expect((await deadline.query(select(7))).rows).toEqual([{ n: 7 }]);
    expect(counts()).toEqual({ total: 2, idle: 2, waiting: 0 });
  });

  it("rejects with PostgreSQL's error and removes that connection, as pg's pool.query does", async () => {
    const deadline = await open(2);
    const failed = await deadline.query({ text: 'SELECT 1 / $1::int', values: [0] }).then(
      () => undefined,
      (err: unknown) => err as { code?: string },
    );
    expect(failed?.code).toBe('22012');
    expect({ total: pool.totalCount, idle: pool.idleCount }).toEqual({ total: 1, idle: 1 });
    // The pool still serves the next statement.
    expect((await deadline.query(select(8))).rows).toEqual([{ n: 8 }]);
  });

  it('answers every one of more statements than connections, the later ones after a wait', async () => {
    const deadline = await open(3);
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => deadline.query(select(i)).then((r) => r.rows[0].n)),
    );
    expect(answers).toEqual(Array.from({ length: 30 }, (_, i) => i));
    expect(counts()).toEqual({ total: 3, idle: 3, waiting: 0 });
  });

  it("rejects with the pool's error once the pool has ended", async () => {
    const deadline = await open(1);
    await pool.end();
    await expect(deadline.query(select(1))).rejects.toThrow(/after calling end on the pool/);
  });

  it('answers through a pool that counts its idle connections and connects by promise only', async () => {
    const deadline = await open(1);
    // Shaped like pg's pool (idle and waiting counts), with a promise-only connect.
    const promiseOnly = {
      get idleCount() {
        return pool.idleCount;
      },
      get waitingCount() {
        return pool.waitingCount;
      },
      connect: (): Promise<PoolClient> => pool.connect() as unknown as Promise<PoolClient>,
    };
    const through = new DeadlinePool(() => promiseOnly as unknown as Pool, 2_000);
    expect((await through.query(select(9))).rows).toEqual([{ n: 9 }]);
    expect((await deadline.query(select(10))).rows).toEqual([{ n: 10 }]);
    expect(pool.idleCount).toBe(1);
  });
});
