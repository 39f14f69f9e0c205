import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DataSource, QueryRunner } from 'typeorm';
import { lazyTransaction } from '../../lib/store/postgres/lazy-transaction.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';

/** Connections checked out of the DataSource's pool right now. */
function checkedOut(ds: DataSource): number {
  const pool = (ds.driver as unknown as { master: { totalCount: number; idleCount: number } })
    .master;
  return pool.totalCount - pool.idleCount;
}

describe('lazyTransaction (real PostgreSQL)', () => {
  let db: TestDatabase;
  let ds: DataSource;
  const rows = async () =>
    ((await ds.query('SELECT v FROM lazy_t ORDER BY id')) as { v: string }[]).map((r) => r.v);

  beforeAll(async () => {
    db = await createTestDatabase('lazytx');
    ds = db.dataSource;
    await ds.initialize();
    await ds.query('CREATE TABLE lazy_t (id serial PRIMARY KEY, v text NOT NULL)');
  });
  afterAll(async () => {
    await db?.drop();
  });

  const finish = async (runner: QueryRunner, commit: boolean) => {
    if (commit) await runner.commitTransaction();
    else await runner.rollbackTransaction();
    await runner.release();
  };

  it('holds no connection and no transaction until its first query', async () => {
    await ds.query('DELETE FROM lazy_t');
    const before = checkedOut(ds);
    const runner = lazyTransaction(ds);
    await new Promise((r) => setTimeout(r, 20));
    expect(checkedOut(ds)).toBe(before);
    expect(runner.isTransactionActive).toBe(false);
    await runner.query(`INSERT INTO lazy_t (v) VALUES ('x')`);
    expect(checkedOut(ds)).toBe(before + 1);
    expect(runner.isTransactionActive).toBe(true);
    expect(await rows()).toEqual([]); // not committed: it is inside a transaction
    await finish(runner, true);
    expect(await rows()).toEqual(['x']);
  });

  it('runs onBegin after BEGIN and before the first statement, in the same transaction', async () => {
    await ds.query('DELETE FROM lazy_t');
    const runner = lazyTransaction(ds, async (r) => {
      await r.query(`INSERT INTO lazy_t (v) VALUES ('onBegin')`);
    });
    const seen = (await runner.query('SELECT v FROM lazy_t')) as { v: string }[];
    expect(seen.map((r) => r.v)).toEqual(['onBegin']);
    await finish(runner, false);
    // Rolled back with the transaction: onBegin ran inside it, after BEGIN.
    expect(await rows()).toEqual([]);
  });

  it('turns a transaction the handler starts itself into a savepoint', async () => {
    await ds.query('DELETE FROM lazy_t');
    const runner = lazyTransaction(ds);
    await runner.query(`INSERT INTO lazy_t (v) VALUES ('outer')`);
    await runner.startTransaction();
    await runner.query(`INSERT INTO lazy_t (v) VALUES ('inner')`);
    await runner.rollbackTransaction(); // to the savepoint only
    expect(runner.isTransactionActive).toBe(true);
    await runner.manager.transaction(async (m) => {
      await m.query(`INSERT INTO lazy_t (v) VALUES ('nested-commit')`);
    });
    expect(await rows()).toEqual([]);
    await finish(runner, true);
    expect(await rows()).toEqual(['outer', 'nested-commit']);
  });

  it('a handler whose first act is startTransaction() still nests inside the outer one', async () => {
    await ds.query('DELETE FROM lazy_t');
    const runner = lazyTransaction(ds);
    await runner.startTransaction();
    await runner.query(`INSERT INTO lazy_t (v) VALUES ('a')`);
    await runner.commitTransaction(); // releases the savepoint; the outer one stays open
    expect(runner.isTransactionActive).toBe(true);
    await finish(runner, false);
    expect(await rows()).toEqual([]);
  });
});
