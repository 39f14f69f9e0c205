/**
 * The layout for large tables: records hash-partitioned on the key, archive range-partitioned by
 * day. The library's migrations must run on it (twice, harmlessly), its start-up check must pass
 * (and still catch a missing scope constraint), and claims, completions, replays, single-commit
 * runs, takeovers into the archive and cleanup must all work through the library.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import {
  idempotencyArchivePartitions,
  idempotencyMigrations,
  idempotencyPartitionedUp,
  idempotencySchema,
} from '../../migrations/index.js';
import { PostgresIdempotencyStore } from '../../lib/store/postgres/postgres-idempotency.store.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';
import { send } from '../fixtures/http-client.js';
import {
  SINGLE_EXECUTIONS_TABLE,
  startFixtureApp,
  type FixtureApp,
} from '../fixtures/payments.fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function partitionedDatabase(prefix: string): Promise<{ db: TestDatabase; ds: DataSource }> {
  const db = await createTestDatabase(prefix);
  const ds = db.newDataSource({ migrations: idempotencyMigrations });
  await ds.initialize();
  const layout = [
    ...idempotencyPartitionedUp('idempotency_keys', { hashPartitions: 4 }),
    ...idempotencyArchivePartitions('idempotency_keys', new Date(Date.now() - 86_400_000), 3),
  ];
  for (const statement of layout) await ds.query(statement);
  return { db, ds };
}

describe('partitioned tables (records by hash of the key, archive by day)', () => {
  let db: TestDatabase;
  let ds: DataSource;
  let f: FixtureApp | undefined;
  beforeAll(async () => {
    ({ db, ds } = await partitionedDatabase('partitioned'));
  });
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  });

  it('runs the migrations, and running them again (TypeORM or the plain statements) changes nothing', async () => {
    expect((await ds.runMigrations()).length).toBe(idempotencyMigrations.length);
    expect(await ds.runMigrations()).toEqual([]);
    for (const statement of idempotencySchema()) await ds.query(statement);
    const kinds = await ds.query(
      `SELECT relname, relkind FROM pg_class WHERE relname IN ('idempotency_keys', 'idempotency_keys_archive') ORDER BY 1`,
    );
    expect(kinds).toEqual([
      { relname: 'idempotency_keys', relkind: 'p' },
      { relname: 'idempotency_keys_archive', relkind: 'p' },
    ]);
    // Migration 4's room for HOT updates reaches the partitions, where rows live.
    const fillfactors = await ds.query(
      `SELECT c.reloptions FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'idempotency_keys'::regclass`,
    );
    expect(fillfactors).toHaveLength(4);
    for (const row of fillfactors) expect(row.reloptions).toEqual(['fillfactor=90']);
  });

  it('claims, completes, replays and runs single-commit routes through the library', async () => {
    await ds.query(SINGLE_EXECUTIONS_TABLE);
    f = await startFixtureApp({ platform: 'express', dataSource: ds, singleCommit: true });
    const keys = Array.from({ length: 12 }, () => randomUUID());
    for (const key of keys) {
      const first = await send(f.url, '/charges', { key, body: { amount: 5, key } });
      expect(first.status).toBe(201);
      const replay = await send(f.url, '/charges', { key, body: { amount: 5, key } });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body.equals(first.body)).toBe(true);
      expect(f.exec.count('charge', key)).toBe(1);
    }
    const single = randomUUID();
    const ran = await send(f.url, '/single/slow', { key: single, body: { ms: 1, key: single } });
    expect(ran.status).toBe(201);
    const again = await send(f.url, '/single/slow', { key: single, body: { ms: 1, key: single } });
    expect(again.headers['idempotent-replayed']).toBe('true');
    // The rows are spread over the hash partitions.
    const placed = await ds.query(
      `SELECT count(DISTINCT tableoid)::int AS partitions, count(*)::int AS n FROM idempotency_keys`,
    );
    expect(placed[0].n).toBe(keys.length + 1);
    expect(placed[0].partitions).toBeGreaterThan(1);
  });

  it('takes over an expired record into the day partition of the archive, and cleans up', async () => {
    const store = new PostgresIdempotencyStore(ds, 'idempotency_keys');
    const scope = {
      key: randomUUID(),
      endpoint: 'POST /p',
      userId: '',
      requestHash: 'a'.repeat(64),
    };
    const claim = { ...scope, ttlSeconds: 1, leaseSeconds: 30 };
    const first = await store.claim(claim);
    if (first.type !== 'claimed') throw new Error(`expected a claim, got ${first.type}`);
    const completion = { statusCode: 201, headers: {}, body: Buffer.from('{}') };
    expect(
      await store.complete(first.lease, { ...completion, transactionId: null, ttlSeconds: 1 }),
    ).not.toBeNull();
    await sleep(1_100);
    const second = await store.claim(claim);
    expect(second.type).toBe('claimed');
    const archived = await ds.query(
      `SELECT tableoid::regclass::text AS part FROM idempotency_keys_archive WHERE idempotency_key = $1`,
      [scope.key],
    );
    const today = new Date().toISOString().slice(0, 10).replace(/-/g, '');
    expect(archived).toEqual([{ part: `idempotency_keys_archive_${today}` }]);
    const result = await store.cleanup({ batchSize: 100, retentionSeconds: 0 });
    expect(result.ran).toBe(true);
    expect(
      await ds.query(
        `SELECT count(*)::int AS n FROM idempotency_keys_archive WHERE idempotency_key = $1`,
        [scope.key],
      ),
    ).toEqual([{ n: 0 }]);
  });
});

describe('schema check on a partitioned records table', () => {
  let db: TestDatabase;
  afterAll(async () => db?.drop());

  const bootError = (ds: DataSource) =>
    startFixtureApp({ platform: 'express', dataSource: ds }).then(
      async (app) => {
        await app.close();
        return 'the app started';
      },
      (err: Error) => err.message,
    );

  it('refuses to start without a valid scope constraint, naming the fix', async () => {
    let ds: DataSource;
    ({ db, ds } = await partitionedDatabase('partitioned_nouq'));
    await ds.runMigrations();
    await ds.query('ALTER TABLE idempotency_keys DROP CONSTRAINT uq_idempotency_keys_scope');
    const fix =
      /ALTER TABLE "idempotency_keys" ADD CONSTRAINT uq_idempotency_keys_scope UNIQUE \(idempotency_key, endpoint, user_id\)\. On a partitioned table/;
    expect(await bootError(ds)).toMatch(fix);
    // On the parent only: not valid until every partition has its index attached.
    await ds.query(
      'CREATE UNIQUE INDEX uq_parent_only ON ONLY idempotency_keys (idempotency_key, endpoint, user_id)',
    );
    expect(await bootError(ds)).toMatch(fix);
    await ds.query('DROP INDEX uq_parent_only');
    await ds.query(
      'ALTER TABLE "idempotency_keys" ADD CONSTRAINT uq_idempotency_keys_scope UNIQUE (idempotency_key, endpoint, user_id)',
    );
    expect(await bootError(ds)).toBe('the app started');
  });
});
