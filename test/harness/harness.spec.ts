import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase, withAdminClient } from './test-database.js';

async function existingDatabases(names: string[]): Promise<string[]> {
  return withAdminClient(async (client) => {
    const result = await client.query<{ datname: string }>(
      'SELECT datname FROM pg_database WHERE datname = ANY($1::text[]) ORDER BY datname',
      [names],
    );
    return result.rows.map((row) => row.datname);
  });
}

describe('test harness: createTestDatabase', () => {
  it('gives each caller an isolated database and drops it cleanly', async () => {
    const a = await createTestDatabase('harness_a');
    const b = await createTestDatabase('harness_b');
    try {
      expect(a.name).not.toBe(b.name);
      expect(a.dataSource.isInitialized).toBe(false);
      expect(await existingDatabases([a.name, b.name])).toEqual([a.name, b.name].sort());

      await a.dataSource.initialize();
      await b.dataSource.initialize();
      expect(await a.dataSource.query('SELECT current_database() AS db')).toEqual([{ db: a.name }]);
      expect(await b.dataSource.query('SELECT current_database() AS db')).toEqual([{ db: b.name }]);

      await a.dataSource.query('CREATE TABLE harness_probe (id int PRIMARY KEY)');
      await a.dataSource.query('INSERT INTO harness_probe (id) VALUES (1), (2)');

      expect(await a.dataSource.query('SELECT count(*)::int AS n FROM harness_probe')).toEqual([
        { n: 2 },
      ]);
      expect(
        await b.dataSource.query("SELECT to_regclass('public.harness_probe') IS NULL AS absent"),
      ).toEqual([{ absent: true }]);
    } finally {
      await a.drop();
      await b.drop();
    }

    expect(a.dataSource.isInitialized).toBe(false);
    expect(b.dataSource.isInitialized).toBe(false);
    expect(await existingDatabases([a.name, b.name])).toEqual([]);
    await expect(a.drop()).resolves.toBeUndefined(); // idempotent
  });

  it('generates safe names and drops a database whose DataSource was never initialized', async () => {
    const db = await createTestDatabase('Weird-Prefix"; DROP DATABASE x; --');
    expect(db.name).toMatch(/^weird_prefix_[a-z0-9_]+$/);
    expect(db.name.length).toBeLessThanOrEqual(63);
    expect(new URL(db.url).pathname).toBe(`/${db.name}`);
    expect(await existingDatabases([db.name])).toEqual([db.name]);
    await db.drop();
    expect(await existingDatabases([db.name])).toEqual([]);
  });

  it('drops a database even while other sessions are connected to it', async () => {
    const db = await createTestDatabase('harness_force');
    // A connection the harness does not know about is terminated by WITH (FORCE).
    const foreign = new pg.Client({ connectionString: db.url });
    foreign.on('error', () => undefined); // terminated by the drop
    await foreign.connect();
    await db.drop();
    expect(await existingDatabases([db.name])).toEqual([]);
    await foreign.end().catch(() => undefined);
  });
});
