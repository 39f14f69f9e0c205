/**
 * `forRoot({ store })` with one PostgresIdempotencyStore for two apps in one process (or an app
 * closed and re-created on the same store, as tests do). The first app's shutdown ends the
 * store's own renewal connection; it closed it for good, so the other app's renewals went back to
 * a pool its own work held, and the lease lapsed under a running handler (attack-81).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { PostgresIdempotencyStore } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import {
  type LeaseApp,
  refundsController,
  retryPastOneLease,
  shortLeaseApp,
} from '../fixtures/lease-app.js';

const refunds = new Map<string, number>();
const Refunds = refundsController(6_000, refunds);

describe('a store shared by two apps, one of them closed', () => {
  let db: MigratedDatabase;
  const pools: pg.Pool[] = [];
  const apps: LeaseApp[] = [];

  beforeAll(async () => {
    db = await createMigratedDatabase('lease_shared');
  });
  afterAll(async () => {
    for (const a of apps) await a.close().catch(() => undefined);
    for (const p of pools) await p.end().catch(() => undefined);
    await db?.drop();
  });

  it('the app still running keeps its lease while the pool is held', async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    const other = new pg.Pool({ connectionString: db.url, max: 5 });
    pools.push(pool, other);
    const store = new PostgresIdempotencyStore<unknown>(pool, 'idempotency_keys', {
      statementTimeoutMs: 1_000,
    });
    const first = await shortLeaseApp({ store }, [Refunds]);
    const second = await shortLeaseApp({ store }, [Refunds]);
    const elsewhere = await shortLeaseApp({ pool: other }, [Refunds]);
    apps.push(first, second, elsewhere);
    await first.close(); // e.g. one of two apps (HTTP + admin) in the process, or a test's app

    // The app's own work holds the pool (transactional handlers, a report, a migration lock).
    const holdPool = async () => {
      const held = await Promise.all([pool.connect(), pool.connect()]);
      return () => held.forEach((c) => c.release());
    };
    expect(await retryPastOneLease(second, elsewhere, refunds, holdPool)).toEqual({
      retry: 409,
      first: 201,
      refunds: 1,
    });
  }, 40_000);
});
