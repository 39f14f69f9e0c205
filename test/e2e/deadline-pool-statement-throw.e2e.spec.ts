import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { metrics, type MeterProvider } from '@opentelemetry/api';
import pg from 'pg';
import { DeadlinePool } from '../../lib/store/postgres/deadline-pool.js';
import type { Pool } from '../../lib/store/postgres/pg-deadline.js';
import { loadTelemetryApi } from '../../lib/telemetry/idempotency.telemetry.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';

/**
 * A throw on the statement's synchronous path (here the app's MeterProvider, which the library
 * calls per statement) is that statement's error: never an uncaught exception, never a leaked
 * connection, whoever called `submitWithin` (a promise executor, or pg-pool's queue).
 */
describe('DeadlinePool: a synchronous throw while submitting a statement', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('deadline_pool_throw');
    await loadTelemetryApi();
  });
  afterAll(async () => {
    metrics.disable();
    await db?.drop();
  });

  it('rejects the statement, releases its connection, and throws nothing uncaught', async () => {
    const uncaught: unknown[] = [];
    const listeners = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    process.on('uncaughtException', (err) => uncaught.push(err));
    const provider = {
      getMeter() {
        throw new Error('meter provider broken');
      },
    } as unknown as MeterProvider;
    metrics.setGlobalMeterProvider(provider);
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    pool.on('error', () => undefined);
    try {
      (await pool.connect()).release();
      const deadline = new DeadlinePool(() => pool as unknown as Pool, 1_000);
      const outcome = await Promise.race([
        deadline.query({ text: 'SELECT 1', values: [] }).then(
          () => 'resolved',
          (e: Error) => `rejected: ${e.message}`,
        ),
        new Promise<string>((r) => setTimeout(() => r('pending'), 2_000).unref()),
      ]);
      await new Promise((r) => setTimeout(r, 50));
      const checkedOut = pool.totalCount - pool.idleCount;
      expect({ outcome, uncaught: uncaught.length, checkedOut }).toEqual({
        outcome: 'rejected: meter provider broken',
        uncaught: 0,
        checkedOut: 0,
      });
    } finally {
      metrics.disable();
      process.removeAllListeners('uncaughtException');
      for (const l of listeners) process.on('uncaughtException', l);
      await Promise.race([pool.end(), new Promise((r) => setTimeout(r, 1_000).unref())]);
    }
  });
});
