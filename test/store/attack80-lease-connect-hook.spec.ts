/**
 * attack-80: the lease connection is made with `new pool.Client(pool.options)`, so it skips what
 * the app's pool does to each of its connections in its 'connect' hook (node-postgres' way to set
 * a search_path, a role, or a tenant setting per connection). With the table in the schema the
 * hook selects, the claim and completion (pool) find it, the renewal (own connection) does not:
 * every renewal fails, the lease lapses under a running handler. Before a069240 it renewed.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { PostgresIdempotencyStore } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

let db: MigratedDatabase;
beforeAll(async () => {
  db = await createMigratedDatabase('a80_hook');
  await db.dataSource.query('CREATE SCHEMA app');
  await db.dataSource.query('ALTER TABLE idempotency_keys SET SCHEMA app');
});
afterAll(async () => db?.drop());

it('renews a lease on a pool whose connect hook sets the search_path', async () => {
  const pool = new pg.Pool({ connectionString: db.url, max: 2 });
  pool.on('connect', (client) => void client.query('SET search_path TO app'));
  const store = new PostgresIdempotencyStore<unknown>(pool, 'idempotency_keys', {
    statementTimeoutMs: 2_000,
  });
  try {
    const claim = await store.claim({
      key: randomUUID(),
      endpoint: 'POST /charges',
      userId: '',
      requestHash: 'a'.repeat(64),
      ttlSeconds: 60,
      leaseSeconds: 6,
    });
    if (claim.type !== 'claimed') throw new Error(claim.type);
    const renewed = await store.renew(claim.lease, 6).then(String, (err: Error) => err.message);
    expect(renewed).toBe('true');
  } finally {
    await store.close();
    await pool.end();
  }
});
