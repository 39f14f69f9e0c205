/** Migration 6 on a live table: existing records count one run, and a second run keeps the steps. */
import { afterEach, describe, expect, it } from '@jest/globals';
import { idempotencyMigrations, RECOVERY_POINTS_UP } from '../../migrations/index.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';

describe('migration 6 (recovery points)', () => {
  let db: TestDatabase | undefined;
  afterEach(async () => db?.drop());

  it('upgrades a live table (runs = 1), and running its statements again changes nothing', async () => {
    db = await createTestDatabase('mig_recovery');
    const ds = db.newDataSource({ migrations: idempotencyMigrations.slice(0, 5) });
    await ds.initialize();
    await ds.runMigrations();
    await ds.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash) VALUES ('k', 'POST /x', repeat('a', 64))`,
    );
    await ds.destroy();

    const upgraded = db.newDataSource({ migrations: idempotencyMigrations });
    await upgraded.initialize();
    expect((await upgraded.runMigrations()).map((m) => m.name)).toEqual([
      'AddRecoveryPoints1764680500000',
    ]);
    expect(await upgraded.query('SELECT runs FROM idempotency_keys')).toEqual([{ runs: 1 }]);
    await upgraded.query(
      `INSERT INTO idempotency_keys_steps (record_id, name, result, run)
       SELECT id, 'charge', convert_to('{"id":"ch_1"}', 'UTF8'), 1 FROM idempotency_keys`,
    );
    for (const statement of RECOVERY_POINTS_UP) await upgraded.query(statement);
    expect(await upgraded.runMigrations()).toEqual([]);
    expect(
      await upgraded.query(
        `SELECT idempotency_key, runs, steps, step_names, resumed_steps FROM idempotency_keys_recoveries`,
      ),
    ).toEqual([
      { idempotency_key: 'k', runs: 1, steps: 1, step_names: ['charge'], resumed_steps: [] },
    ]);
  });
});
