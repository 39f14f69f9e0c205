import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import {
  migrate,
  pgTransactions,
  PostgresIdempotencyStore,
  TransactionAbortedError,
  typeormTransactions,
  type TransactionClient,
} from '../../lib/index.js';
import { tableNames } from '../../lib/store/postgres/table-names.js';
import { idempotencyStoreContract } from '../../lib/testing/index.js';
import { ledgerClaim } from '../fixtures/ledger-claim.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';

const t = tableNames('idempotency_keys');
let db: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase('store_pool');
  pool = new pg.Pool({ connectionString: db.url, max: 6 });
  await migrate(pool);
  await pool.query('CREATE TABLE ledger (ref text)');
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

/** The store reads the database clock: moving time forward is moving every timestamp back. */
async function advance(seconds: number): Promise<void> {
  const by = `make_interval(secs => ${Number(seconds)})`;
  await pool.query(
    `UPDATE ${t.records} SET locked_until = locked_until - ${by}, expires_at = expires_at - ${by},
            created_at = created_at - ${by}, completed_at = completed_at - ${by}`,
  );
  await pool.query(`UPDATE ${t.archive} SET expires_at = expires_at - ${by}`);
  await pool.query(`UPDATE ${t.replays} SET expires_at = expires_at - ${by}`);
}

/** The same contract as on a DataSource, with the store built on a plain pg.Pool. */
idempotencyStoreContract(async () => {
  await pool.query(`TRUNCATE ${t.records}, ${t.archive}, ${t.replays}, ${t.cleanupRuns}`);
  return { store: new PostgresIdempotencyStore(pool, 'idempotency_keys'), advance };
});

describe('PostgresIdempotencyStore on a pg.Pool: transactions', () => {
  const store = () =>
    new PostgresIdempotencyStore(pool, 'idempotency_keys', { transactions: pgTransactions() });
  const request = ledgerClaim;
  const completion = {
    statusCode: 201,
    headers: {},
    body: Buffer.from('{}'),
    transactionId: null,
    ttlSeconds: 60,
  };
  const ledger = async (ref: string) =>
    (await pool.query('SELECT 1 FROM ledger WHERE ref = $1', [ref])).rowCount;

  it('hands the handler the TransactionClient, which begins on its first query', async () => {
    const s = store();
    const claimed = await s.claim(request());
    if (claimed.type !== 'claimed') throw new Error(claimed.type);
    const tx = s.beginTransaction(claimed.lease);
    const client: TransactionClient = tx.manager;
    expect(tx.active).toBe(false);
    const ref = randomUUID();
    const inserted = await client.query('INSERT INTO ledger (ref) VALUES ($1)', [ref]);
    expect(inserted.rowCount).toBe(1);
    expect(tx.active).toBe(true);
    expect(await ledger(ref)).toBe(0);
    expect(await s.complete(claimed.lease, completion, tx)).not.toBeNull();
    await tx.commit();
    expect(await ledger(ref)).toBe(1);
    await expect(client.query('SELECT 1')).rejects.toThrow('the transaction already ended');
  });

  it("single mode: the handler's query and the record commit together; a rollback frees the key", async () => {
    const s = store();
    const req = request();
    const first = await s.claimInTransaction(req);
    if (first.type !== 'claimed') throw new Error(first.type);
    const ref = randomUUID();
    await first.transaction.manager.query({
      text: 'INSERT INTO ledger (ref) VALUES ($1)',
      values: [ref],
    });
    await first.transaction.rollback();
    expect(await ledger(ref)).toBe(0);
    const again = await s.claimInTransaction(req);
    if (again.type !== 'claimed') throw new Error(again.type);
    await again.transaction.manager.query('INSERT INTO ledger (ref) VALUES ($1)', [ref]);
    expect(await s.complete(again.lease, completion, again.transaction)).not.toBeNull();
    await again.transaction.commit();
    expect(await ledger(ref)).toBe(1);
    expect((await s.claim(req)).type).toBe('completed');
  });

  it('typeormTransactions on a pool: an EntityManager on the store connection, savepoints nest', async () => {
    // Never initialized: the adapter needs no pool of TypeORM's own.
    const ds = db.newDataSource();
    const s = new PostgresIdempotencyStore(pool, 'idempotency_keys', {
      transactions: typeormTransactions(ds),
    });
    const claimed = await s.claim(request());
    if (claimed.type !== 'claimed') throw new Error(claimed.type);
    const tx = s.beginTransaction(claimed.lease);
    const [outer, inner] = [randomUUID(), randomUUID()];
    await tx.manager.query('INSERT INTO ledger (ref) VALUES ($1)', [outer]);
    await expect(
      tx.manager.transaction(async (m) => {
        await m.query('INSERT INTO ledger (ref) VALUES ($1)', [inner]);
        throw new Error('inner fails');
      }),
    ).rejects.toThrow('inner fails');
    expect(await s.complete(claimed.lease, completion, tx)).not.toBeNull();
    await tx.commit();
    expect([await ledger(outer), await ledger(inner)]).toEqual([1, 0]);
    expect(ds.isInitialized).toBe(false);
  });

  it('single mode: after an abort the TransactionClient is fenced, nothing commits, the key is free', async () => {
    const s = new PostgresIdempotencyStore(pool, 'idempotency_keys', {
      transactions: pgTransactions(),
      singleCommitMaxSeconds: 0.2,
    });
    const req = request();
    const first = await s.claimInTransaction(req);
    if (first.type !== 'claimed') throw new Error(first.type);
    const ref = randomUUID();
    await first.transaction.manager.query('INSERT INTO ledger (ref) VALUES ($1)', [ref]);
    const aborted = await first.transaction.aborted!;
    expect(aborted).toBeInstanceOf(TransactionAbortedError);
    await expect(
      first.transaction.manager.query('INSERT INTO ledger (ref) VALUES ($1)', [ref]),
    ).rejects.toBe(aborted);
    await first.transaction.rollback();
    expect(await ledger(ref)).toBe(0);
    const again = await s.claimInTransaction(req);
    expect(again.type).toBe('claimed');
    if (again.type === 'claimed') await again.transaction.rollback();
  });

  it('checks its schema on the pool', async () => {
    await expect(store().checkSchema()).resolves.toBeUndefined();
  });
});
