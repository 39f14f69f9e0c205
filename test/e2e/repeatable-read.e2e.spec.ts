import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import {
  createMigratedDatabase,
  defaultIsolation,
  type MigratedDatabase,
} from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';
import { insertExpiredRecord } from '../fixtures/expired-record.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Handlers that wait, by ref, until the test lets them return. */
const gates = new Map<string, { started: () => void; release: Promise<void> }>();

/**
 * Under REPEATABLE READ the statement that tries the scope's advisory lock takes the
 * transaction's snapshot when it starts, before the lock. To make the window between the two
 * wide and certain, this database's search_path puts a `pg_try_advisory_xact_lock` of its own in
 * front of pg_catalog's: it sleeps for `slowlock.delay.seconds`, then calls the real one.
 */
async function widenSnapshotToLockWindow(db: MigratedDatabase) {
  await db.dataSource.query(`CREATE SCHEMA slowlock`);
  await db.dataSource.query(`CREATE TABLE slowlock.delay (seconds float8 NOT NULL)`);
  await db.dataSource.query(`INSERT INTO slowlock.delay VALUES (0)`);
  await db.dataSource.query(`CREATE FUNCTION slowlock.pg_try_advisory_xact_lock(k bigint)
    RETURNS boolean LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_sleep((SELECT seconds FROM slowlock.delay));
      RETURN pg_catalog.pg_try_advisory_xact_lock(k);
    END $$`);
  await db.dataSource.query(
    `ALTER DATABASE "${db.name}" SET search_path TO slowlock, public, pg_catalog`,
  );
  await defaultIsolation(db, 'repeatable read');
}

describe('REPEATABLE READ single-commit: a duplicate whose snapshot predates the holder’s commit', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;
  const exec = new Executions();

  beforeAll(async () => {
    db = await createMigratedDatabase('settings_rr_window');
    await widenSnapshotToLockWindow(db);
    await db.dataSource.query(`CREATE TABLE ledger (ref text NOT NULL)`);
    const dataSource = db.newDataSource();
    await dataSource.initialize();

    @Controller('rr')
    class GatedController {
      @Post('single')
      @Idempotent({ transactional: 'single' })
      async single(@Body() body: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
        exec.hit('single', body.ref);
        await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref]);
        const gate = gates.get(body.ref);
        gate?.started();
        await gate?.release;
        return { ref: body.ref, run: exec.count('single', body.ref) };
      }

      /** Written at the transaction's top level, not in a subtransaction the probe left open. */
      @Post('xid')
      @Idempotent({ transactional: 'single' })
      async xid(@IdempotencyCtx() idem: IdempotencyContext) {
        const [row] = await idem.manager!.query(
          `INSERT INTO ledger (ref) VALUES ('xid')
           RETURNING xmin::text AS row_xid, pg_current_xact_id()::text AS top_xid`,
        );
        return row;
      }
    }

    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource, cleanup: { enabled: false }, replayCache: false }),
      ],
      controllers: [GatedController],
    })
    class AppModule {}
    ({ url, close } = await listenApp(AppModule));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  const setDelay = (seconds: number) =>
    db.dataSource.query(`UPDATE slowlock.delay SET seconds = $1`, [seconds]);

  /** Backends of this database sleeping in the widened lock function. */
  const sleepingInLock = async () =>
    (
      await db.dataSource.query(
        `SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND wait_event = 'PgSleep'`,
        [db.name],
      )
    ).length;

  it.each(['new', 'expired'] as const)(
    '%s key: the duplicate gets the lock after the commit and replays, the handler ran once',
    async (kind) => {
      const key = randomUUID();
      if (kind === 'expired') await insertExpiredRecord(db.dataSource, key, 'POST /rr/single');
      let release!: () => void;
      const started = new Promise<void>((resolve) =>
        gates.set(key, { started: resolve, release: new Promise((r) => (release = r)) }),
      );
      await setDelay(0);
      const first = send(url, '/rr/single', { key, body: { ref: key } });
      await started;
      // The duplicate's lock statement takes its snapshot now, while the first is uncommitted,
      // and tries the lock once the first has committed.
      await setDelay(1.5);
      const duplicate = send(url, '/rr/single', { key, body: { ref: key } });
      while ((await sleepingInLock()) === 0) await sleep(10);
      await setDelay(0);
      release();
      const a = await first;
      expect(a.status).toBe(201);
      const b = await duplicate;
      expect(exec.count('single', key)).toBe(1);
      expect(b.status).toBe(201);
      expect(b.headers['idempotent-replayed']).toBe('true');
      expect(b.text).toBe(a.text);
      const ledger = await db.dataSource.query(`SELECT 1 FROM ledger WHERE ref = $1`, [key]);
      expect(ledger).toHaveLength(1);
    },
  );
  it('the probe leaves no savepoint behind: the handler writes in the top transaction', async () => {
    const res = await send(url, '/rr/xid', { key: randomUUID() });
    expect(res.status).toBe(201);
    const { row_xid, top_xid } = res.json();
    expect(row_xid).toBe(top_xid);
  });
});
