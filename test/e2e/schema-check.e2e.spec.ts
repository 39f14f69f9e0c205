import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { idempotencyMigrations, idempotencySchema } from '../../migrations/index.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';
import { bootError } from '../fixtures/boot-error.js';
import { send } from '../fixtures/http-client.js';
import { LogCapture } from '../fixtures/log-capture.js';
import { startFixtureApp, type FixtureApp } from '../fixtures/payments.fixture.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';

describe('schema check at start-up', () => {
  let bare: TestDatabase;
  let migrated: TestDatabase;
  beforeAll(async () => {
    bare = await createTestDatabase('schema_bare');
    migrated = await createTestDatabase('schema_ok');
    const ds = migrated.newDataSource({ migrations: idempotencyMigrations });
    await ds.initialize();
    await ds.runMigrations();
    await ds.destroy();
  });
  afterAll(async () => {
    await bare?.drop();
    await migrated?.drop();
  });

  let f: FixtureApp | undefined;
  let proxy: TcpProxy | undefined;
  afterEach(async () => {
    proxy?.resume();
    await f?.close();
    f = undefined;
    await proxy?.stop();
    proxy = undefined;
  });

  it('fails bootstrap naming every missing table and the fix, instead of answering 503 forever', async () => {
    const start = startFixtureApp({ platform: 'express', dataSource: bare.newDataSource() });
    expect(await bootError(start)).toMatch(
      /lacks what the idempotency store needs: tables "idempotency_keys", "idempotency_keys_archive", "idempotency_keys_replays", "idempotency_keys_cleanup_runs", "idempotency_keys_daily_rollup", "idempotency_keys_refusals", "idempotency_keys_steps"\. To fix, add `idempotencyMigrations` from 'nestjs-pg-idempotency\/migrations' to your DataSource's `migrations` and run them .* or run the plain SQL files migrations\/001_idempotency_keys\.sql to migrations\/006_recovery_points\.sql in order/,
    );
  });

  it('names a missing column, and for a custom tableName the idempotencySchema() fix', async () => {
    const ds = bare.newDataSource();
    await ds.initialize();
    await ds.query('CREATE SCHEMA IF NOT EXISTS billing');
    for (const statement of idempotencySchema('billing.idem_keys')) await ds.query(statement);
    await ds.query('ALTER TABLE billing.idem_keys_replays DROP COLUMN expires_at');
    const start = startFixtureApp({
      platform: 'express',
      dataSource: ds,
      options: { tableName: 'billing.idem_keys' },
    });
    expect(await bootError(start)).toMatch(
      /needs: column "billing"\."idem_keys_replays"\.expires_at\. To fix, run the statements of `idempotencySchema\("billing\.idem_keys"\)`/,
    );
  });

  it('names the columns of migrations 3 and 4 (and the tables of 5) when only the first two ran (the statements use them)', async () => {
    const partial = await createTestDatabase('schema_partial');
    try {
      const ds = partial.newDataSource({ migrations: idempotencyMigrations.slice(0, 2) });
      await ds.initialize();
      await ds.runMigrations();
      const start = startFixtureApp({ platform: 'express', dataSource: ds });
      expect(await bootError(start)).toMatch(
        /needs: tables "idempotency_keys_daily_rollup", "idempotency_keys_refusals", "idempotency_keys_steps"; columns "idempotency_keys"\.response_key_id, "idempotency_keys"\.response_digest, "idempotency_keys"\.runs, "idempotency_keys_archive"\.response_key_id, "idempotency_keys_archive"\.response_digest, "idempotency_keys_replays"\.replay_count, "idempotency_keys_replays"\.first_replayed_at\./,
      );
    } finally {
      await partial.drop();
    }
  });

  it('starts when the migrations ran', async () => {
    f = await startFixtureApp({ platform: 'express', dataSource: migrated.newDataSource() });
    const key = randomUUID();
    expect((await send(f.url, '/charges', { key, body: {} })).status).toBe(201);
  });

  /** Unreachable or hanging PostgreSQL at start-up: start with a warning, answer 503, recover. */
  it.each(['unreachable', 'hanging'] as const)(
    'starts anyway when PostgreSQL is %s at start-up, answers 503, and recovers',
    async (fault) => {
      proxy = TcpProxy.forUrl(migrated.url);
      await proxy.start();
      const dataSource = new DataSource({
        type: 'postgres',
        url: proxy.wrap(migrated.url),
        poolErrorHandler: () => undefined,
      });
      await dataSource.initialize(); // the app's own, connected before the fault
      if (fault === 'unreachable') await proxy.cut();
      else proxy.blackhole();
      const logs = new LogCapture();
      const started = Date.now();
      f = await startFixtureApp({
        platform: 'express',
        dataSource,
        logger: logs,
        options: { statementTimeoutMs: 1_000 },
      });
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(logs.of('IdempotencySchema', 'warn').map((l) => l.message)).toEqual([
        expect.stringMatching(/^Could not check the idempotency tables \(.+\); starting anyway/),
      ]);
      const key = randomUUID();
      expect((await send(f.url, '/charges', { key, body: {} })).status).toBe(503);
      if (fault === 'unreachable') await proxy.restore();
      else proxy.resume();
      const other = randomUUID();
      expect((await send(f.url, '/charges', { key: other, body: {} })).status).toBe(201);
      const closing = f;
      f = { ...closing, close: async () => (await closing.close(), await dataSource.destroy()) };
    },
  );
});
