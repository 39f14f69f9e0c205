/**
 * The PostgreSQL store renews leases on a connection of its own: not one of the app's pool,
 * reopened when it was lost, ended by `close()`, keeping no process up, set up by the pool's
 * 'connect' hook; a pool that cannot open one renews through itself (attack-79, attack-80).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { PostgresIdempotencyStore } from '../../lib/index.js';
import type { IdempotencyPool } from '../../lib/interfaces/idempotency-pool.interface.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

let db: MigratedDatabase;
beforeAll(async () => {
  db = await createMigratedDatabase('store_lease_conn');
});
afterAll(async () => db?.drop());

const backends = async (name: string): Promise<number[]> =>
  (
    await db.dataSource.query(
      'SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid',
      [name],
    )
  ).map((r: { pid: number }) => r.pid);

async function claimed(store: PostgresIdempotencyStore<unknown>) {
  const scope = { key: randomUUID(), endpoint: 'POST /charges', userId: '' };
  const claim = await store.claim({
    ...scope,
    requestHash: 'a'.repeat(64),
    ttlSeconds: 60,
    leaseSeconds: 5,
  });
  if (claim.type !== 'claimed') throw new Error(claim.type);
  return claim.lease;
}

describe('PostgresIdempotencyStore lease renewals', () => {
  it('renew on their own connection while the pool is held, reopen it once lost, end it on close', async () => {
    const name = `lease-${randomUUID().slice(0, 8)}`;
    const pool = new pg.Pool({ connectionString: db.url, max: 1, application_name: name });
    const store = new PostgresIdempotencyStore<unknown>(pool, 'idempotency_keys', {
      statementTimeoutMs: 1_000,
    });
    try {
      const lease = await claimed(store);
      const held = await pool.connect();
      const [{ pid: heldPid }] = (await held.query('SELECT pg_backend_pid() AS pid')).rows;
      let renewals: boolean[];
      try {
        renewals = [await store.renew(lease, 5)];
        const [own] = (await backends(name)).filter((pid) => pid !== heldPid);
        await db.dataSource.query('SELECT pg_terminate_backend($1)', [own]);
        // The lost connection fails at most the renewal that meets it; the next one reopens.
        const afterLoss = await store.renew(lease, 5).catch(() => store.renew(lease, 5));
        renewals.push(afterLoss);
      } finally {
        held.release();
      }
      const open = (await backends(name)).length;
      await store.close();
      const afterClose = (await backends(name)).length;
      expect({ renewals, open, afterClose }).toEqual({
        renewals: [true, true],
        open: 2,
        afterClose: 1,
      });
    } finally {
      await pool.end();
    }
  });

  it('go through the pool when it cannot open a connection of its own', async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    let connects = 0;
    const plain: IdempotencyPool = {
      connect: () => (connects++, pool.connect()),
      query: (config) => pool.query(config),
    };
    const store = new PostgresIdempotencyStore<unknown>(plain, 'idempotency_keys');
    try {
      const lease = await claimed(store);
      const before = connects;
      expect(await store.renew(lease, 5)).toBe(true);
      expect(connects).toBe(before + 1);
    } finally {
      await store.close();
      await pool.end();
    }
  });

  it('open no handle that holds the process up', async () => {
    const sockets = () =>
      process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    const store = new PostgresIdempotencyStore<unknown>(pool, 'idempotency_keys');
    try {
      const lease = await claimed(store);
      const before = sockets();
      const renewed = await store.renew(lease, 5);
      // Its connection is open (unref'ed: an app that ends its pool without closing exits).
      expect({ renewed, added: sockets() - before }).toEqual({ renewed: true, added: 0 });
    } finally {
      await store.close();
      await pool.end();
    }
  });

  it("run the pool's connect hook on their connection (a search_path set there)", async () => {
    await db.dataSource.query('CREATE SCHEMA app');
    await db.dataSource.query(
      'CREATE TABLE app.idempotency_keys (LIKE idempotency_keys INCLUDING ALL)',
    );
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    pool.on('connect', (client) => void client.query('SET search_path TO app'));
    const store = new PostgresIdempotencyStore<unknown>(pool, 'idempotency_keys');
    try {
      const lease = await claimed(store);
      const renewed = await store.renew(lease, 5).then(String, (err: Error) => err.message);
      const [row] = await db.dataSource.query(
        'SELECT count(*)::int AS n FROM app.idempotency_keys WHERE id = $1',
        [lease.id],
      );
      expect({ renewed, inApp: row.n }).toEqual({ renewed: 'true', inApp: 1 });
    } finally {
      await store.close();
      await pool.end();
    }
  });
});
