import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
  ProblemCode,
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

interface Body {
  ref: string;
  holdMs?: number;
}

/** Single-commit handlers idle this long in their transaction, by ref; then query again or not. */
const idles = new Map<string, { ms: number; then: 'return' | 'query' | 'killed' }>();

/** Server settings a managed PostgreSQL sets, on this test's own database and connections only. */
async function startApp(db: MigratedDatabase, exec: Executions, pgOptions: string) {
  const dataSource = db.newDataSource({ extra: { options: pgOptions } });
  await dataSource.initialize();

  @Controller('s')
  class SettingsController {
    @Post('plain')
    @Idempotent()
    async plain(@Body() body: Body) {
      exec.hit('plain', body.ref);
      await sleep(body.holdMs ?? 0);
      return { ref: body.ref };
    }

    /** Its COMMIT runs a deferred trigger that takes a while: the record's update stays open. */
    @Post('slow-commit')
    @Idempotent({ transactional: true })
    async slowCommit(@Body() body: Body, @IdempotencyCtx() idem: IdempotencyContext) {
      exec.hit('slow-commit', body.ref);
      await idem.manager!.query('INSERT INTO slow_commit (ref) VALUES ($1)', [body.ref]);
      return { ref: body.ref };
    }

    @Post('single')
    @Idempotent({ transactional: 'single' })
    async single(@Body() body: Body, @IdempotencyCtx() idem: IdempotencyContext) {
      exec.hit('single', body.ref);
      await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref]);
      const idle = idles.get(body.ref);
      if (idle) await sleep(idle.ms);
      if (idle?.then === 'query') await idem.manager!.query('SELECT 1');
      if (idle?.then === 'killed') await idem.manager!.query('SELECT pg_sleep(30)');
      return { ref: body.ref };
    }
  }

  @Module({
    imports: [
      IdempotencyModule.forRoot({ dataSource, cleanup: { enabled: false }, replayCache: false }),
    ],
    controllers: [SettingsController],
  })
  class AppModule {}
  return { dataSource, ...(await listenApp(AppModule)) };
}

describe('REPEATABLE READ: concurrent duplicates taking over an expired record', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;
  const exec = new Executions();

  beforeAll(async () => {
    db = await createMigratedDatabase('settings_rr');
    await defaultIsolation(db, 'repeatable read');
    await db.dataSource.query(`CREATE TABLE ledger (ref text NOT NULL)`);
    ({ url, close } = await startApp(db, exec, ''));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('answers one 201 and 409 in progress to the others, never 503', async () => {
    const keys = Array.from({ length: 8 }, () => randomUUID());
    for (const key of keys) await insertExpiredRecord(db.dataSource, key, 'POST /s/plain');
    const answers = await Promise.all(
      keys.flatMap((key) =>
        Array.from({ length: 12 }, () =>
          send(url, '/s/plain', { key, body: { ref: key, holdMs: 300 } }),
        ),
      ),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s !== 201 && s !== 409)).toEqual([]);
    for (const a of answers.filter((x) => x.status === 409)) {
      expect(a.json().code).toBe(ProblemCode.InProgress);
    }
    for (const key of keys) expect(exec.count('plain', key)).toBe(1);
    const fresh = answers.filter((a) => a.status === 201 && !a.headers['idempotent-replayed']);
    expect(fresh).toHaveLength(keys.length);
  });
  it('single-commit: concurrent duplicates (new or expired keys) run the handler once, never 503', async () => {
    const keys = Array.from({ length: 10 }, () => randomUUID());
    for (const key of keys.slice(5))
      await insertExpiredRecord(db.dataSource, key, 'POST /s/single');
    const answers = await Promise.all(
      keys.flatMap((key) =>
        Array.from({ length: 20 }, () => send(url, '/s/single', { key, body: { ref: key } })),
      ),
    );
    expect(answers.map((a) => a.status).filter((s) => s !== 201 && s !== 409)).toEqual([]);
    for (const key of keys) expect(exec.count('single', key)).toBe(1);
  });
});

describe('lock_timeout: a duplicate waiting on the record behind an open transaction', () => {
  let db: MigratedDatabase;
  let dataSource: DataSource;
  let url: string;
  let close: () => Promise<void>;
  const exec = new Executions();

  beforeAll(async () => {
    db = await createMigratedDatabase('settings_lock');
    await db.dataSource.query(`CREATE TABLE slow_commit (ref text)`);
    await db.dataSource.query(`CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql
      AS $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$`);
    await db.dataSource.query(`CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON slow_commit
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()`);
    ({ dataSource, url, close } = await startApp(db, exec, '-c lock_timeout=200'));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('answers the immediate 409 in progress, then the replay', async () => {
    const key = randomUUID();
    const body = { ref: key };
    const first = send(url, '/s/slow-commit', { key, body });
    // The first request's COMMIT (its record completed in it) is running the deferred trigger.
    const committing = async () =>
      (
        await dataSource.query(
          `SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND query = 'COMMIT' AND wait_event = 'PgSleep'`,
          [db.name],
        )
      ).length > 0;
    while (!(await committing())) await sleep(20);
    const started = Date.now();
    const duplicate = await send(url, '/s/slow-commit', { key, body });
    expect(duplicate.status).toBe(409);
    expect(duplicate.json().code).toBe(ProblemCode.InProgress);
    expect(Date.now() - started).toBeLessThan(1500);
    expect((await first).status).toBe(201);
    const replay = await send(url, '/s/slow-commit', { key, body });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(exec.count('slow-commit', key)).toBe(1);
  });
});

describe('single-commit session ended by the server: idle_in_transaction_session_timeout, terminated backend', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;
  const exec = new Executions();

  beforeAll(async () => {
    db = await createMigratedDatabase('settings_idle');
    await db.dataSource.query(`CREATE TABLE ledger (ref text NOT NULL)`);
    ({ url, close } = await startApp(db, exec, '-c idle_in_transaction_session_timeout=500'));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  const ledger = async (ref: string) =>
    (await db.dataSource.query(`SELECT ref FROM ledger WHERE ref = $1`, [ref])).length;

  it.each(['return', 'query'] as const)(
    'answers 503 naming the setting when the handler idles past it, then %s; the retry runs',
    async (then) => {
      const key = randomUUID();
      const ref = randomUUID();
      idles.set(ref, { ms: 1500, then });
      const res = await send(url, '/s/single', { key, body: { ref } });
      expect(res.status).toBe(503);
      expect(res.headers['retry-after']).toBeDefined();
      expect(res.json().code).toBe(ProblemCode.StoreUnavailable);
      expect(res.json().detail).toContain('idle_in_transaction_session_timeout');
      expect(await ledger(ref)).toBe(0);
      expect(await db.records('idempotency_key = $1', [key])).toEqual([]);

      idles.delete(ref);
      const retry = await send(url, '/s/single', { key, body: { ref } });
      expect(retry.status).toBe(201);
      expect(await ledger(ref)).toBe(1);
      expect(exec.count('single', ref)).toBe(2);
    },
  );

  it("answers 503, not the handler's 500, when its backend is terminated during its statement", async () => {
    const key = randomUUID();
    const ref = randomUUID();
    idles.set(ref, { ms: 0, then: 'killed' });
    const pending = send(url, '/s/single', { key, body: { ref } });
    const kill = async () =>
      (
        await db.dataSource.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE datname = $1 AND query = 'SELECT pg_sleep(30)' AND state = 'active'`,
          [db.name],
        )
      ).length > 0;
    while (!(await kill())) await sleep(20);
    const res = await pending;
    expect(res.status).toBe(503);
    expect(res.json().code).toBe(ProblemCode.StoreUnavailable);
    expect(res.json().detail).toContain('connection of its transaction was lost');
    expect(await ledger(ref)).toBe(0);
    idles.delete(ref);
    expect((await send(url, '/s/single', { key, body: { ref } })).status).toBe(201);
  });
});
