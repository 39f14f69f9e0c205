/**
 * The PostgreSQL store renews a lease on the app's pool while it has a connection to spare, and
 * otherwise on a connection of its own (attack-79): set up by the pool's hooks, reopened once
 * lost, ended by `close()` (and opened again by a later renewal), keeping no process up; a pool
 * that cannot open one renews through itself (attack-80, attack-81).
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

/** Takes every connection of `pool` (max 1 or 2) until the returned function gives them back. */
async function holdAll(pool: pg.Pool): Promise<{ pids: number[]; release(): void }> {
  const clients = await Promise.all(
    Array.from({ length: pool.options.max ?? 1 }, () => pool.connect()),
  );
  const pids = await Promise.all(
    clients.map(async (c) => (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid),
  );
  return { pids, release: () => clients.forEach((c) => c.release()) };
}

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
  it('go on the pool while it has room, on their own connection while it is held; reopened once lost, ended on close', async () => {
    const name = `lease-${randomUUID().slice(0, 8)}`;
    const pool = new pg.Pool({ connectionString: db.url, max: 1, application_name: name });
    const store = new PostgresIdempotencyStore<unknown>(pool, 'idempotency_keys', {
      statementTimeoutMs: 1_000,
    });
    try {
      const lease = await claimed(store);
      const withRoom = await store.renew(lease, 5);
      const onPoolOnly = (await backends(name)).length;
      const held = await holdAll(pool);
      let renewals: boolean[];
      try {
        renewals = [await store.renew(lease, 5)];
        const [own] = (await backends(name)).filter((pid) => !held.pids.includes(pid));
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
      expect({ withRoom, onPoolOnly, renewals, open, afterClose }).toEqual({
        withRoom: true,
        onPoolOnly: 1,
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

  it('open no handle that holds the process up, and open again after close', async () => {
    const sockets = () =>
      process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
    const name = `lease-${randomUUID().slice(0, 8)}`;
    const pool = new pg.Pool({ connectionString: db.url, max: 1, application_name: name });
    const store = new PostgresIdempotencyStore<unknown>(pool, 'idempotency_keys');
    try {
      const lease = await claimed(store);
      const held = await holdAll(pool);
      try {
        const before = sockets();
        const renewed = await store.renew(lease, 5);
        const added = sockets() - before;
        // Another app sharing the store closed it: its renewals still keep off the held pool.
        await store.close();
        const again = await store.renew(lease, 5);
        const open = (await backends(name)).length;
        expect({ renewed, added, again, open }).toEqual({
          renewed: true,
          added: 0,
          again: true,
          open: 2,
        });
      } finally {
        held.release();
      }
    } finally {
      await store.close();
      await pool.end();
    }
  });

  describe("in the schema the pool's hook sets, with a table of the same name in public", () => {
    beforeAll(async () => {
      await db.dataSource.query('CREATE SCHEMA app');
      await db.dataSource.query(
        'CREATE TABLE app.idempotency_keys (LIKE idempotency_keys INCLUDING ALL)',
      );
    });
    const setPath = (client: pg.PoolClient) => client.query('SET search_path TO app');
    const hooks: [string, (pool: pg.Pool) => void, pg.PoolConfig][] = [
      ["the pool's 'connect' event", (pool) => pool.on('connect', (c) => void setPath(c)), {}],
      ['onConnect', () => undefined, { onConnect: setPath } as unknown as pg.PoolConfig],
      [
        'verify',
        () => undefined,
        {
          verify: (c: pg.PoolClient, done: (err?: Error) => void) =>
            void setPath(c).then(() => done(), done),
        } as pg.PoolConfig,
      ],
    ];
    it.each(hooks)('renew through %s', async (_hook, listen, config) => {
      const pool = new pg.Pool({ connectionString: db.url, max: 1, ...config });
      listen(pool);
      const store = new PostgresIdempotencyStore<unknown>(pool, 'idempotency_keys', {
        statementTimeoutMs: 1_000,
      });
      try {
        const lease = await claimed(store);
        const held = await holdAll(pool);
        let renewed: string;
        try {
          renewed = await store.renew(lease, 5).then(String, (err: Error) => err.message);
        } finally {
          held.release();
        }
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
});
