import { afterEach, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import {
  idempotencyKeysUp,
  idempotencyMigrations,
  idempotencySchema,
  idempotencySchemaDown,
  idempotencySqlFiles,
  RESPONSE_PROTECTION_UP,
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
      'ProtectStoredResponses1764680200000',
      'TallyReplayAudit1764680300000',
      'KeepFinanceHistory1764680400000',
      'AddRecoveryPoints1764680500000',
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
      response_key_id: 'character varying',
      response_digest: 'character',
      transaction_id: 'character varying',
      created_at: 'timestamp with time zone',
      completed_at: 'timestamp with time zone',
      expires_at: 'timestamp with time zone',
      locked_until: 'timestamp with time zone',
    });
    expect((await indexes(db)).map((i: any) => i.indexname)).toEqual(
      expect.arrayContaining(['uq_idempotency_keys_scope', 'idx_idempotency_keys_expires_at']),
    );
    // The archive copies records column by column, so it gets the new columns too.
    expect(await columns(db, 'idempotency_keys_archive')).toEqual(
      expect.arrayContaining([
        { column_name: 'response_key_id', data_type: 'character varying' },
        { column_name: 'response_digest', data_type: 'character' },
      ]),
    );
    expect(await columns(db, 'idempotency_keys_replays')).toEqual(
      expect.arrayContaining([
        { column_name: 'replay_count', data_type: 'integer' },
        { column_name: 'first_replayed_at', data_type: 'timestamp with time zone' },
      ]),
    );
    const fillfactor = async () =>
      (
        await ds.query(`SELECT reloptions FROM pg_class WHERE oid = 'idempotency_keys'::regclass`)
      )[0].reloptions;
    // Room on each page: the replay counters of a record are bumped without index writes (HOT).
    expect(await fillfactor()).toEqual(['fillfactor=90']);
    // Migration 6 first: the recovery points and the runs counter go.
    expect(await columns(db, 'idempotency_keys_steps')).not.toEqual([]);
    await ds.undoLastMigration();
    expect(await columns(db, 'idempotency_keys_steps')).toEqual([]);
    expect(await columns(db)).not.toContainEqual(expect.objectContaining({ column_name: 'runs' }));
    // Migration 5: the roll-up and the refusals go, the views read live rows only again.
    expect(await columns(db, 'idempotency_keys_daily_rollup')).not.toEqual([]);
    await ds.undoLastMigration();
    expect(await columns(db, 'idempotency_keys_daily_rollup')).toEqual([]);
    expect(await columns(db, 'idempotency_keys_refusals')).toEqual([]);
    expect(await columns(db, 'idempotency_keys_conflicts_daily')).toEqual([]);
    expect(await ds.query('SELECT records FROM idempotency_keys_failures_daily')).toEqual([]);
    // Migration 4: replay rows lose their count, the views count rows again.
    await ds.undoLastMigration();
    expect(await fillfactor()).toBeNull();
    expect(
      (await columns(db, 'idempotency_keys_replays')).map((c: any) => c.column_name),
    ).not.toContain('replay_count');
    expect(await ds.query('SELECT replays FROM idempotency_keys_deduplications LIMIT 1')).toEqual(
      [],
    );
    // Reverting removes it; the table never comes from synchronize.
    await ds.undoLastMigration();
    expect((await columns(db)).map((c: any) => c.column_name)).not.toContain('response_key_id');
    expect(
      (await columns(db, 'idempotency_keys_archive')).map((c: any) => c.column_name),
    ).not.toContain('response_digest');
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

  it('migration 3 is harmless on a live table, and its down() never leaves a sealed body to replay as plaintext', async () => {
    db = await createTestDatabase('mig_protect');
    const ds = db.newDataSource({ migrations: idempotencyMigrations.slice(0, 3) });
    await ds.initialize();
    await ds.runMigrations();
    const insert = (key: string, raw: string, keyId: string | null) =>
      ds.query(
        `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, status_code, response_raw, response_key_id)
         VALUES ($1, 'POST /x', repeat('a', 64), 'completed', 201, $2, $3)`,
        [key, Buffer.from(raw), keyId],
      );
    await insert('sealed', 'ciphertext', 'A');
    await insert('plain', '{"ok":true}', null);
    const copied = `id, idempotency_key, endpoint, user_id, request_hash, status, status_code,
      response_raw, response_key_id, replay_count, created_at, expires_at`;
    await ds.query(
      `INSERT INTO idempotency_keys_archive (${copied}) SELECT ${copied} FROM idempotency_keys`,
    );
    await ds.query(`UPDATE idempotency_keys SET id = gen_random_uuid()`);
    // Running the statements again (as the plain SQL file may be) changes nothing.
    for (const statement of RESPONSE_PROTECTION_UP) await ds.query(statement);
    expect(await ds.query('SELECT count(*)::int AS n FROM idempotency_keys')).toEqual([{ n: 2 }]);

    await ds.undoLastMigration();
    for (const table of ['idempotency_keys', 'idempotency_keys_archive']) {
      const rows = await ds.query(
        `SELECT idempotency_key, encode(response_raw, 'escape') AS raw FROM ${table} ORDER BY 1`,
      );
      expect(rows).toEqual([
        { idempotency_key: 'plain', raw: '{"ok":true}' },
        { idempotency_key: 'sealed', raw: null },
      ]);
    }
    // Up again restores the columns.
    await ds.runMigrations();
    await ds.destroy();
    await db.dataSource.initialize();
    expect((await columns(db)).map((c: any) => c.column_name)).toContain('response_key_id');
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
      ['idem_keys_all', 'idempotency_keys_all'],
      ['idem_keys_deduplications', 'idempotency_keys_deduplications'],
    ]) {
      expect(await columns(db, custom)).toEqual(await columns(db, standard));
    }
    expect(() => idempotencyKeysUp('x; DROP TABLE y')).toThrow(/invalid tableName/);
  });

  it('takes a custom tableName schema down cleanly, leaving the default one alone, and up again', async () => {
    db = await createTestDatabase('mig_named_down');
    await db.dataSource.initialize();
    const ds = db.dataSource;
    await ds.query('CREATE SCHEMA billing');
    await ds.query(sqlFiles());
    const objects = (schema: string) =>
      ds.query(
        `SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 ORDER BY 1`,
        [schema],
      );
    const standard = await objects('public');
    for (const statement of idempotencySchema('billing.idem_keys')) await ds.query(statement);
    const created = await objects('billing');
    // Tables, views, indexes and sequences: every one of them goes with down().
    expect(created.length).toBeGreaterThan(15);
    for (const statement of idempotencySchemaDown('billing.idem_keys')) await ds.query(statement);
    expect(await objects('billing')).toEqual([]);
    expect(await objects('public')).toEqual(standard);
    for (const statement of idempotencySchema('billing.idem_keys')) await ds.query(statement);
    expect(await objects('billing')).toEqual(created);
  });
});
