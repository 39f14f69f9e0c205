import { afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { migrate, PostgresIdempotencyStore } from '../../lib/index.js';
import { idempotencyMigrations } from '../../migrations/index.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';

const FILES = [
  '001_idempotency_keys.sql',
  '002_idempotency_audit.sql',
  '003_response_protection.sql',
  '004_replay_tally.sql',
  '005_finance_history.sql',
  '006_recovery_points.sql',
];

/** `migrate(pool)`: the plain SQL migrations for apps without TypeORM, on a fresh database each. */
describe('migrate(pool)', () => {
  let db: TestDatabase | undefined;
  const pools: pg.Pool[] = [];
  const fresh = async () => {
    db = await createTestDatabase('migrate');
    const pool = new pg.Pool({ connectionString: db.url, max: 4 });
    pools.push(pool);
    return pool;
  };
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((p) => p.end()));
    await db?.drop();
  });
  const checkSchema = (pool: pg.Pool, tableName = 'idempotency_keys') =>
    new PostgresIdempotencyStore(pool, tableName).checkSchema();

  it('gives a fresh database every table the store checks for', async () => {
    const pool = await fresh();
    await expect(checkSchema(pool)).rejects.toThrow('lacks what the idempotency store needs');
    expect(await migrate(pool)).toEqual(FILES);
    await expect(checkSchema(pool)).resolves.toBeUndefined();
  });

  it('applies nothing the second time, and keeps the data', async () => {
    const pool = await fresh();
    await migrate(pool);
    await pool.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash) VALUES ('k', 'POST /x', repeat('a', 64))`,
    );
    const ledger = async () =>
      (await pool.query('SELECT name, applied_at FROM idempotency_keys_migrations ORDER BY name'))
        .rows;
    const before = await ledger();
    expect(await migrate(pool)).toEqual([]);
    expect(await ledger()).toEqual(before);
    expect((await pool.query('SELECT count(*)::int AS n FROM idempotency_keys')).rows).toEqual([
      { n: 1 },
    ]);
  });

  it('two instances migrating at once: each file applied once, both succeed', async () => {
    const pool = await fresh();
    const other = new pg.Pool({ connectionString: db!.url, max: 2 });
    pools.push(other);
    const [a, b] = await Promise.all([migrate(pool), migrate(other)]);
    expect([...a, ...b].sort()).toEqual(FILES);
    expect([a.length, b.length].sort()).toEqual([0, FILES.length]);
    await expect(checkSchema(pool)).resolves.toBeUndefined();
  });

  it('a custom tableName in its own schema', async () => {
    const pool = await fresh();
    await pool.query('CREATE SCHEMA billing');
    expect(await migrate(pool, { tableName: 'billing.idem_keys' })).toEqual(FILES);
    await expect(checkSchema(pool, 'billing.idem_keys')).resolves.toBeUndefined();
    expect(await migrate(pool, { tableName: 'billing.idem_keys' })).toEqual([]);
  });

  it('on a database the TypeORM migrations set up: applies the files again, harmlessly', async () => {
    const pool = await fresh();
    const ds = db!.newDataSource({ migrations: idempotencyMigrations });
    await ds.initialize();
    await ds.runMigrations();
    expect(await migrate(pool)).toEqual(FILES);
    await expect(checkSchema(pool)).resolves.toBeUndefined();
  });

  it('rolls back all of a run that fails, and frees the lock', async () => {
    const pool = await fresh();
    // A view in the way of the records table: the first file fails.
    await pool.query('CREATE VIEW idempotency_keys AS SELECT 1 AS x');
    await expect(migrate(pool)).rejects.toThrow();
    expect(
      (await pool.query(`SELECT to_regclass('idempotency_keys_migrations') AS t`)).rows,
    ).toEqual([{ t: null }]);
    await pool.query('DROP VIEW idempotency_keys');
    expect(await migrate(pool)).toEqual(FILES);
  });
});
