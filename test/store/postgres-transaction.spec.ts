import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { EntityManager } from 'typeorm';
import { PostgresIdempotencyStore } from '../../lib/index.js';
import type { IdempotencyTransaction, Lease } from '../../lib/index.js';
import { ledgerClaim } from '../fixtures/ledger-claim.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

/** The PostgreSQL store's transaction handle, as the execution uses it in transactional mode. */
describe('PostgresIdempotencyStore transactions', () => {
  let db: MigratedDatabase;
  let store: PostgresIdempotencyStore;
  beforeAll(async () => {
    db = await createMigratedDatabase('store_tx');
    await db.dataSource.query('CREATE TABLE ledger (ref text)');
    store = new PostgresIdempotencyStore(db.dataSource, 'idempotency_keys');
  });
  afterAll(async () => db?.drop());

  const claim = async (): Promise<Lease> => {
    const outcome = await store.claim(ledgerClaim());
    if (outcome.type !== 'claimed') throw new Error(outcome.type);
    return outcome.lease;
  };
  const completion = { statusCode: 201, headers: {}, body: Buffer.from('{}'), transactionId: null };
  const pool = () => (db.dataSource.driver as unknown as { master: { idleCount: number } }).master;
  const ledger = async () =>
    (await db.dataSource.query('SELECT ref FROM ledger ORDER BY ref')).map((r: any) => r.ref);

  it('begins on the first statement, runs onBegin once before it, and commits with the record', async () => {
    const lease = await claim();
    const begun: boolean[] = [];
    const tx: IdempotencyTransaction<EntityManager> = store.beginTransaction(
      lease,
      async (handle) => {
        begun.push(handle === tx && handle.active);
        // The claim row is locked whatever the isolation level (READ COMMITTED here).
        expect(await store.lockInTransaction(lease, handle)).toBe(true);
      },
    );
    expect(tx.active).toBe(false);
    await tx.manager.query(`INSERT INTO ledger (ref) VALUES ('committed')`);
    await tx.manager.query('SELECT 1');
    expect(begun).toEqual([true]);
    expect(tx.active).toBe(true);
    expect(await store.complete(lease, { ...completion, ttlSeconds: 60 }, tx)).not.toBeNull();
    // Not visible outside the transaction until it commits.
    expect(await db.records('id = $1', [lease.id])).toMatchObject([{ status: 'in_progress' }]);
    expect(await ledger()).not.toContain('committed');
    await tx.commit();
    expect(tx.active).toBe(false);
    expect(await db.records('id = $1', [lease.id])).toMatchObject([{ status: 'completed' }]);
    expect(await ledger()).toContain('committed');
  });

  it('rolls back the handler writes and the completion together', async () => {
    const lease = await claim();
    const tx = store.beginTransaction(lease);
    await tx.manager.query(`INSERT INTO ledger (ref) VALUES ('rolled back')`);
    await store.complete(lease, { ...completion, ttlSeconds: 60 }, tx);
    await tx.rollback();
    expect(await ledger()).not.toContain('rolled back');
    expect(await db.records('id = $1', [lease.id])).toMatchObject([{ status: 'in_progress' }]);
  });

  it('holds a connection only from its first statement, and gives it back when it ends', async () => {
    const lease = await claim();
    const idle = pool().idleCount;
    expect(idle).toBeGreaterThan(0);
    for (const end of ['commit', 'rollback'] as const) {
      const tx = store.beginTransaction(lease);
      expect(pool().idleCount).toBe(idle);
      await tx.manager.query('SELECT 1');
      expect(pool().idleCount).toBe(idle - 1);
      await tx[end]();
      expect(tx.active).toBe(false);
      expect(pool().idleCount).toBe(idle);
    }
    const unused = store.beginTransaction(lease);
    await unused.commit();
    await unused.rollback();
    expect(pool().idleCount).toBe(idle);
  });
});
