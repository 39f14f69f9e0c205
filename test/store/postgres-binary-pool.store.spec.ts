import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { migrate, PostgresIdempotencyStore } from '../../lib/index.js';
import { tableNames } from '../../lib/store/postgres/table-names.js';
import { idempotencyStoreContract } from '../../lib/testing/index.js';
import { ledgerClaim } from '../fixtures/ledger-claim.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';

const t = tableNames('idempotency_keys');
/** What an app on a `binary: true` pool may register: its own binary parsers. */
const OIDS = [16, 21, 701, 3802];
let db: TestDatabase;
let pool: pg.Pool;
const originals = OIDS.map((oid) => pg.types.getTypeParser(oid, 'binary'));
beforeAll(async () => {
  db = await createTestDatabase('store_binary_pool');
  pool = new pg.Pool({ connectionString: db.url, max: 6, binary: true } as pg.PoolConfig);
  await migrate(new pg.Pool({ connectionString: db.url, max: 1 }).on('error', () => undefined));
  for (const oid of OIDS) pg.types.setTypeParser(oid, 'binary', () => 'app');
});
afterAll(async () => {
  OIDS.forEach((oid, i) => pg.types.setTypeParser(oid, 'binary', originals[i]));
  await pool?.end();
  await db?.drop();
});

async function advance(seconds: number): Promise<void> {
  const by = `make_interval(secs => ${Number(seconds)})`;
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  try {
    await admin.query(
      `UPDATE ${t.records} SET locked_until = locked_until - ${by}, expires_at = expires_at - ${by},
              created_at = created_at - ${by}, completed_at = completed_at - ${by}`,
    );
    await admin.query(`UPDATE ${t.archive} SET expires_at = expires_at - ${by}`);
    await admin.query(`UPDATE ${t.replays} SET expires_at = expires_at - ${by}`);
  } finally {
    await admin.end();
  }
}

/** The contract on a pool whose every connection asks for binary results. */
idempotencyStoreContract(async () => {
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  await admin.query(`TRUNCATE ${t.records}, ${t.archive}, ${t.replays}, ${t.cleanupRuns}`);
  await admin.end();
  return { store: new PostgresIdempotencyStore(pool, 'idempotency_keys'), advance };
});

describe('single mode on a binary: true pool', () => {
  it("completes a taken-over record with the database's expiry", async () => {
    const store = new PostgresIdempotencyStore(pool, 'idempotency_keys');
    const req = { ...ledgerClaim(), ttlSeconds: 600, leaseSeconds: 30 };
    const first = await store.claim(req);
    if (first.type !== 'claimed') throw new Error(first.type);
    await advance(60);
    const taken = await store.claimInTransaction(req);
    if (taken.type !== 'claimed') throw new Error(taken.type);
    const done = await store.complete(
      taken.lease,
      {
        statusCode: 201,
        headers: {},
        body: Buffer.from('{}'),
        transactionId: null,
        ttlSeconds: 600,
      },
      taken.transaction,
    );
    await taken.transaction.commit();
    expect(done?.secondsLeft).toBeGreaterThan(590);
    expect(done?.secondsLeft).toBeLessThanOrEqual(600);
    expect(Math.abs(done!.expiresAt.getTime() - (Date.now() + 600_000))).toBeLessThan(10_000);
    expect(await store.claim(req)).toMatchObject({ type: 'completed', expiresAt: done!.expiresAt });
  });
});
