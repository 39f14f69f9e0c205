/**
 * attack-80: an app that ends its pool but never calls app.close() (a script, a test that ends
 * its DataSource, a pool with allowExitOnIdle) used to let the process exit. The lease connection
 * is a ref'ed socket of its own that only the 60 s idle timer or store.close() ends: the process
 * stays up a minute after its last renewal, and jest reports an open handle / "did not exit".
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { PostgresIdempotencyStore } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

let db: MigratedDatabase;
beforeAll(async () => {
  db = await createMigratedDatabase('a80_handles');
});
afterAll(async () => db?.drop());

const sockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

it('leaves nothing keeping the process up once the app ended its pool', async () => {
  const name = `a80-${randomUUID().slice(0, 8)}`;
  const pool = new pg.Pool({ connectionString: db.url, max: 2, application_name: name });
  const store = new PostgresIdempotencyStore<unknown>(pool, 'idempotency_keys');
  const before = sockets();
  const claim = await store.claim({
    key: randomUUID(),
    endpoint: 'POST /charges',
    userId: '',
    requestHash: 'a'.repeat(64),
    ttlSeconds: 60,
    leaseSeconds: 6,
  });
  if (claim.type !== 'claimed') throw new Error(claim.type);
  await store.renew(claim.lease, 6);
  await pool.end();
  await sleep(1_000);
  // Handles that keep the event loop up (an unref'ed socket is not one).
  const left = sockets() - before;
  await store.close(); // the spec's own clean-up, after the measurement
  expect(left).toBe(0);
});
