/**
 * PgBouncer in session pooling, `default_pool_size` = the app's pool max as the docs advise: every
 * open connection of the app's pool, idle ones too, keeps a server connection. A renewal sent on
 * a connection of the store's own waited in PgBouncer's queue for a server connection the idle
 * pool kept, and the lease lapsed under the running handler (attack-81). With room in the pool,
 * renewals go on the pool.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { startPgBouncer, type PgBouncer } from '../fixtures/pgbouncer.js';
import {
  type LeaseApp,
  refundsController,
  retryPastOneLease,
  shortLeaseApp,
} from '../fixtures/lease-app.js';

const refunds = new Map<string, number>();
const Refunds = refundsController(6_000, refunds);

describe('lease renewals through PgBouncer session pooling', () => {
  let db: MigratedDatabase;
  let bouncer: PgBouncer;
  const pools: pg.Pool[] = [];
  const apps: LeaseApp[] = [];

  beforeAll(async () => {
    db = await createMigratedDatabase('lease_bouncer');
    bouncer = await startPgBouncer({ poolMode: 'session', defaultPoolSize: 2 });
  });
  afterAll(async () => {
    for (const a of apps) await a.close().catch(() => undefined);
    for (const p of pools) await p.end().catch(() => undefined);
    await bouncer?.stop();
    await db?.drop();
  });

  it('a running handler keeps its claim while its pool has idle connections', async () => {
    const pool = new pg.Pool({ connectionString: bouncer.url(db.name), max: 2 });
    const other = new pg.Pool({ connectionString: db.url, max: 5 });
    pools.push(pool, other);
    const a = await shortLeaseApp({ pool }, [Refunds]);
    const b = await shortLeaseApp({ pool: other }, [Refunds]);
    apps.push(a, b);
    // A burst of traffic opened the pool's two connections; they sit idle in the pool.
    const warm = await Promise.all([pool.connect(), pool.connect()]);
    warm.forEach((c) => c.release());

    expect(await retryPastOneLease(a, b, refunds)).toEqual({ retry: 409, first: 201, refunds: 1 });
  }, 40_000);
});
