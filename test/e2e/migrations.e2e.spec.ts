import { afterEach, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import {
  idempotencyKeysUp,
  idempotencyMigrations,
  idempotencySchema,
  idempotencySqlFiles,
} from '../../migrations/index.js';

const sqlFiles = () => Object.values(idempotencySqlFiles()).join('\n');
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';

const columns = (db: TestDatabase, table = 'idempotency_keys') =>
  db.dataSource.query(
    `SELECT column_name, data_type FROM information_schema.columns WHERE table_name = $1 ORDER BY column_name`,
    [table],
  );
const indexes = (db: TestDatabase) =>
  db.dataSource.query(
    `SELECT indexname FROM pg_indexes WHERE tablename = 'idempotency_keys' ORDER BY indexname`,
  );

describe('migrations', () => {
  let db: TestDatabase | undefined;
  afterEach(async () => db?.drop());

  it('installs the table fresh through TypeORM, and a second run does nothing', async () => {
    db = await createTestDatabase('mig_typeorm');
    const ds = db.newDataSource({ migrations: idempotencyMigrations });
    await ds.initialize();
    const first = await ds.runMigrations();
    expect(first.map((m) => m.name)).toEqual([
      'CreateIdempotencyKeys1764680000000',
      'CreateIdempotencyAudit1764680100000',
    ]);
    await ds.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, expires_at) VALUES ('k', 'POST /x', repeat('a', 64), now())`,
    );
    expect(await ds.runMigrations()).toEqual([]);
    expect(await ds.query('SELECT count(*)::int AS n FROM idempotency_keys')).toEqual([{ n: 1 }]);

    await db.dataSource.initialize();
    const cols = Object.fromEntries(
      (await columns(db)).map((c: any) => [c.column_name, c.data_type]),
    );
    expect(cols).toMatchObject({
      id: 'uuid',
      idempotency_key: 'character varying',
      endpoint: 'character varying',
      user_id: 'text',
      request_hash: 'character',
      status: 'character varying',
      status_code: 'smallint',
      response_body: 'jsonb',
      response_raw: 'bytea',
      transaction_id: 'character varying',
      created_at: 'timestamp with time zone',
      completed_at: 'timestamp with time zone',
      expires_at: 'timestamp with time zone',
      locked_until: 'timestamp with time zone',
    });
    expect((await indexes(db)).map((i: any) => i.indexname)).toEqual(
      expect.arrayContaining(['uq_idempotency_keys_scope', 'idx_idempotency_keys_expires_at']),
    );
    // Reverting removes it; the table never comes from synchronize.
    await ds.undoLastMigration();
    await ds.undoLastMigration();
    expect(await columns(db)).toEqual([]);
    expect(await columns(db, 'idempotency_keys_replays')).toEqual([]);
  });

  it('ships plain SQL files that equal the migrations and run twice without harm', async () => {
    for (const [name, text] of Object.entries(idempotencySqlFiles())) {
      expect(readFileSync(new URL(`../../migrations/${name}`, import.meta.url), 'utf8')).toBe(text);
    }
    const file = sqlFiles();
    db = await createTestDatabase('mig_sql');
    await db.dataSource.initialize();
    await db.dataSource.query(file);
    await db.dataSource.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash) VALUES ('k', 'e', repeat('a', 64))`,
    );
    await db.dataSource.query(file);
    expect(await db.dataSource.query('SELECT count(*)::int AS n FROM idempotency_keys')).toEqual([
      { n: 1 },
    ]);
  });

  it('enforces one record per (key, endpoint, user)', async () => {
    db = await createTestDatabase('mig_unique');
    await db.dataSource.initialize();
    await db.dataSource.query(sqlFiles());
    const insert = (user: string) =>
      db!.dataSource.query(
        `INSERT INTO idempotency_keys (idempotency_key, endpoint, user_id, request_hash) VALUES ('k', 'POST /p', $1, repeat('a', 64))`,
        [user],
      );
    await insert('1');
    await insert('2');
    await expect(insert('1')).rejects.toThrow(/uq_idempotency_keys_scope/);
  });

  it('builds the same schema under another table name', async () => {
    db = await createTestDatabase('mig_named');
    await db.dataSource.initialize();
    await db.dataSource.query('CREATE SCHEMA billing');
    for (const statement of idempotencySchema('billing.idem_keys'))
      await db.dataSource.query(statement);
    await db.dataSource.query(sqlFiles());
    for (const [custom, standard] of [
      ['idem_keys', 'idempotency_keys'],
      ['idem_keys_archive', 'idempotency_keys_archive'],
      ['idem_keys_deduplications', 'idempotency_keys_deduplications'],
    ]) {
      expect(await columns(db, custom)).toEqual(await columns(db, standard));
    }
    expect(() => idempotencyKeysUp('x; DROP TABLE y')).toThrow(/invalid tableName/);
  });
});
