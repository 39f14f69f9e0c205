import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DataSource, EntityManager } from 'typeorm';
import {
  lazyTransaction,
  type StoreTransaction,
} from '../../lib/store/postgres/lazy-transaction.js';
import { DeadlinePool } from '../../lib/store/postgres/deadline-pool.js';
import type { Pool } from '../../lib/store/postgres/pg-deadline.js';
import { typeormTransactions } from '../../lib/store/postgres/typeorm-transactions.adapter.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';

const master = (ds: DataSource) =>
  (ds.driver as unknown as { master: Pool & { totalCount: number; idleCount: number } }).master;

/** Connections checked out of the DataSource's pool right now. */
function checkedOut(ds: DataSource): number {
  return master(ds).totalCount - master(ds).idleCount;
}

/** The lazy transaction as a TypeORM handler sees it (the `typeormTransactions` adapter). */
describe('lazyTransaction (real PostgreSQL)', () => {
  let db: TestDatabase;
  let ds: DataSource;
  let pool: DeadlinePool;
  const rows = async () =>
    ((await ds.query('SELECT v FROM lazy_t ORDER BY id')) as { v: string }[]).map((r) => r.v);
  const lazy = (onBegin: (tx: { manager: EntityManager }) => Promise<void> = async () => {}) =>
    lazyTransaction(pool, typeormTransactions(ds).bind, onBegin);

  beforeAll(async () => {
    db = await createTestDatabase('lazytx');
    ds = db.dataSource;
    await ds.initialize();
    pool = new DeadlinePool(() => master(ds), 5_000);
    await ds.query('CREATE TABLE lazy_t (id serial PRIMARY KEY, v text NOT NULL)');
  });
  afterAll(async () => {
    await db?.drop();
  });

  const finish = async (lazy: StoreTransaction<EntityManager>, commit: boolean) => {
    if (commit) await lazy.transaction.commit();
    else await lazy.transaction.rollback();
  };

  it('holds no connection and no transaction until its first query', async () => {
    await ds.query('DELETE FROM lazy_t');
    const before = checkedOut(ds);
    const tx = lazy();
    await new Promise((r) => setTimeout(r, 20));
    expect(checkedOut(ds)).toBe(before);
    expect(tx.transaction.active).toBe(false);
    await tx.transaction.manager.query(`INSERT INTO lazy_t (v) VALUES ('x')`);
    expect(checkedOut(ds)).toBe(before + 1);
    expect(tx.transaction.active).toBe(true);
    expect(await rows()).toEqual([]); // not committed: it is inside a transaction
    await finish(tx, true);
    expect(checkedOut(ds)).toBe(before);
    expect(await rows()).toEqual(['x']);
  });

  it('runs onBegin after BEGIN and before the first statement, in the same transaction', async () => {
    await ds.query('DELETE FROM lazy_t');
    const tx = lazy(async (t) => {
      await t.manager.query(`INSERT INTO lazy_t (v) VALUES ('onBegin')`);
    });
    const seen = (await tx.transaction.manager.query('SELECT v FROM lazy_t')) as { v: string }[];
    expect(seen.map((r) => r.v)).toEqual(['onBegin']);
    await finish(tx, false);
    // Rolled back with the transaction: onBegin ran inside it, after BEGIN.
    expect(await rows()).toEqual([]);
  });

  it('turns a transaction the handler starts itself into a savepoint', async () => {
    await ds.query('DELETE FROM lazy_t');
    const tx = lazy();
    const runner = tx.transaction.manager.queryRunner!;
    await runner.query(`INSERT INTO lazy_t (v) VALUES ('outer')`);
    await runner.startTransaction();
    await runner.query(`INSERT INTO lazy_t (v) VALUES ('inner')`);
    await runner.rollbackTransaction(); // to the savepoint only
    expect(runner.isTransactionActive).toBe(true);
    await tx.transaction.manager.transaction(async (m) => {
      await m.query(`INSERT INTO lazy_t (v) VALUES ('nested-commit')`);
    });
    expect(await rows()).toEqual([]);
    await finish(tx, true);
    expect(await rows()).toEqual(['outer', 'nested-commit']);
  });

  it('a handler whose first act is startTransaction() still nests inside the outer one', async () => {
    await ds.query('DELETE FROM lazy_t');
    const tx = lazy();
    const runner = tx.transaction.manager.queryRunner!;
    await runner.startTransaction();
    await runner.query(`INSERT INTO lazy_t (v) VALUES ('a')`);
    await runner.commitTransaction(); // releases the savepoint; the outer one stays open
    expect(tx.transaction.active).toBe(true);
    await finish(tx, false);
    expect(await rows()).toEqual([]);
  });

  it('refuses statements once it ended', async () => {
    const tx = lazy();
    await tx.transaction.manager.query('SELECT 1');
    await finish(tx, true);
    await expect(tx.transaction.manager.query('SELECT 1')).rejects.toThrow(
      'the transaction already ended',
    );
  });
});
