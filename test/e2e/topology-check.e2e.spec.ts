/**
 * A database the store cannot claim on is refused at start-up with the fix in the message
 * (read-only transactions, a standby, no unique index on the scope); one that turns read-only
 * later answers 503 and never runs a handler, in single-commit mode too.
 */
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { bootError } from '../fixtures/boot-error.js';
import { send } from '../fixtures/http-client.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import {
  SINGLE_EXECUTIONS_TABLE,
  startFixtureApp,
  type FixtureApp,
} from '../fixtures/payments.fixture.js';
import { startStandby, type Standby } from '../fixtures/standby-cluster.js';
import { withAdminClient } from '../harness/test-database.js';

describe('topology checks', () => {
  const dbs: MigratedDatabase[] = [];
  let f: FixtureApp | undefined;
  let standby: Standby | undefined;
  const migrated = async (prefix: string) => {
    const db = await createMigratedDatabase(prefix);
    dbs.push(db);
    return db;
  };
  afterEach(async () => {
    await f?.close();
    f = undefined;
    await standby?.stop();
    standby = undefined;
  });
  afterAll(async () => {
    for (const db of dbs) await db.drop();
  });

  it('refuses a connection whose transactions are read-only, naming the setting and the fix', async () => {
    const db = await migrated('topo_ro');
    const dataSource = db.newDataSource({
      extra: { options: '-c default_transaction_read_only=on' },
    });
    const message = await bootError(startFixtureApp({ platform: 'express', dataSource }));
    expect(message).toMatch(/transactions are read-only \(default_transaction_read_only = on/);
    expect(message).toMatch(/read-write primary/);
  });

  it('refuses a standby, naming the primary as the fix', async () => {
    standby = await startStandby();
    const message = await bootError(
      startFixtureApp({ platform: 'express', dataSource: standby.dataSource() }),
    );
    expect(message).toMatch(
      /points at a standby \(in recovery, read-only\): point it at the primary/,
    );
  });

  it('refuses a records table without the unique index on the scope, naming it', async () => {
    const db = await migrated('topo_unique');
    await db.dataSource.query(
      'ALTER TABLE idempotency_keys DROP CONSTRAINT uq_idempotency_keys_scope',
    );
    // A unique index on other columns, or partial, does not serve ON CONFLICT either.
    await db.dataSource.query(
      'CREATE UNIQUE INDEX partial_scope ON idempotency_keys (idempotency_key, endpoint, user_id) WHERE status = $$completed$$',
    );
    const message = await bootError(
      startFixtureApp({ platform: 'express', dataSource: db.newDataSource() }),
    );
    expect(message).toMatch(
      /"idempotency_keys" has no unique index on \(idempotency_key, endpoint, user_id\), which claims need \(INSERT \.\.\. ON CONFLICT\): restore it, e\.g\. ALTER TABLE "idempotency_keys" ADD CONSTRAINT uq_idempotency_keys_scope UNIQUE/,
    );
  });

  it('a database turned read-only after start-up answers 503 and runs no handler, in single-commit mode too', async () => {
    const db = await migrated('topo_ro_late');
    await db.dataSource.query(SINGLE_EXECUTIONS_TABLE);
    f = await startFixtureApp({
      platform: 'express',
      dataSource: db.newDataSource({ applicationName: 'topo-ro-late' }),
      singleCommit: true,
    });
    await withAdminClient(async (admin) => {
      await admin.query(`ALTER DATABASE "${db.name}" SET default_transaction_read_only = on`);
      await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'topo-ro-late'`,
      );
    });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const key = randomUUID();
      statuses.push((await send(f.url, '/single/slow', { key, body: { ms: 0, key } })).status);
      statuses.push((await send(f.url, '/charges', { key, body: { key } })).status);
    }
    expect(new Set(statuses)).toEqual(new Set([503]));
    expect(f.exec.seq).toBe(0);
  });
});
