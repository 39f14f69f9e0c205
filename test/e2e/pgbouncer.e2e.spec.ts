/**
 * Through a real PgBouncer (Debian's 1.18): transaction pooling works with
 * `preparedStatements: false` in every mode, every key runs once and nothing answers 503;
 * with named statements on, start-up is refused naming the setting; session pooling works as is.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
  type IdempotencyModuleOptions,
} from '../../lib/index.js';
import { bootError } from '../fixtures/boot-error.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import {
  createMigratedDatabase,
  defaultIsolation,
  type MigratedDatabase,
} from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';
import { startPgBouncer, type PgBouncer } from '../fixtures/pgbouncer.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ROUTES = ['plain', 'tx', 'single'] as const;
const KEYS = 15;
const COPIES = 4; // concurrent requests per key
const CONCURRENCY = 32;

function paymentsController(exec: Executions) {
  const pay = async (route: string, key: string, idem: IdempotencyContext) => {
    const n = exec.hit(route, key);
    await idem.manager?.query('INSERT INTO payments (route, key) VALUES ($1, $2)', [route, key]);
    await sleep(15);
    return { route, key, n };
  };
  @Controller()
  class PaymentsController {
    @Post('plain')
    @Idempotent()
    plain(@Body() b: { key: string }, @IdempotencyCtx() idem: IdempotencyContext) {
      return pay('plain', b.key, idem);
    }
    @Post('tx')
    @Idempotent({ transactional: true })
    tx(@Body() b: { key: string }, @IdempotencyCtx() idem: IdempotencyContext) {
      return pay('tx', b.key, idem);
    }
    @Post('single')
    @Idempotent({ transactional: 'single' })
    single(@Body() b: { key: string }, @IdempotencyCtx() idem: IdempotencyContext) {
      return pay('single', b.key, idem);
    }
  }
  return PaymentsController;
}

async function startApp(url: string, options: Partial<IdempotencyModuleOptions> = {}) {
  const exec = new Executions();
  const dataSource = new DataSource({ type: 'postgres', url, extra: { max: 6 } });
  @Module({
    imports: [IdempotencyModule.forRoot({ dataSource, cleanup: { enabled: false }, ...options })],
    controllers: [paymentsController(exec)],
  })
  class AppModule {}
  return { exec, app: await listenApp(AppModule) };
}

/** Every route × key sent COPIES times at once, CONCURRENCY in flight; then each key once more. */
async function traffic(app: ListeningApp, exec: Executions, tag: string) {
  const jobs = ROUTES.flatMap((route) =>
    Array.from({ length: KEYS * COPIES }, (_, i) => ({ route, key: `${tag}-${i % KEYS}` })),
  );
  // One request per route first: the first transactional request reads the isolation level on a
  // second pool connection while holding one, which at a cold start under load starves the pool.
  for (const route of ROUTES) await send(app.url, `/${route}`, { key: `${tag}-warm`, body: {} });
  const statuses: Record<string, number> = {};
  const lane = async () => {
    for (let job = jobs.shift(); job; job = jobs.shift()) {
      const res = await send(app.url, `/${job.route}`, { key: job.key, body: { key: job.key } });
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  const replays: string[] = [];
  for (const route of ROUTES) {
    for (let i = 0; i < KEYS; i++) {
      const res = await send(app.url, `/${route}`, {
        key: `${tag}-${i}`,
        body: { key: `${tag}-${i}` },
      });
      replays.push(`${res.status} ${res.headers['idempotent-replayed'] ?? 'fresh'}`);
    }
  }
  const runs = ROUTES.flatMap((r) =>
    Array.from({ length: KEYS }, (_, i) => exec.count(r, `${tag}-${i}`)),
  );
  return { statuses, replays, runs };
}

describe('behind PgBouncer 1.18', () => {
  let db: MigratedDatabase;
  let bouncer: PgBouncer | undefined;
  let app: ListeningApp | undefined;
  beforeAll(async () => {
    db = await createMigratedDatabase('pgbouncer');
    await db.dataSource.query('CREATE TABLE payments (route text, key text)');
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await bouncer?.stop();
    bouncer = undefined;
  });
  afterAll(async () => db?.drop());

  const expectOnce = async (result: Awaited<ReturnType<typeof traffic>>, tag: string) => {
    expect(Object.keys(result.statuses).filter((s) => s !== '201' && s !== '409')).toEqual([]);
    expect(new Set(result.runs)).toEqual(new Set([1]));
    expect(new Set(result.replays)).toEqual(new Set(['201 true']));
    const [{ committed }] = await db.dataSource.query(
      `SELECT count(*)::int AS committed FROM payments WHERE key LIKE $1 || '-%'`,
      [tag],
    );
    expect(committed).toBe(2 * KEYS); // tx and single write through the transaction
  };

  it('transaction pooling with preparedStatements: false: every key runs once, no 503, in every mode', async () => {
    bouncer = await startPgBouncer({ poolMode: 'transaction', defaultPoolSize: 4 });
    const started = await startApp(bouncer.url(db.name), { preparedStatements: false });
    app = started.app;
    await expectOnce(await traffic(app, started.exec, 'txpool'), 'txpool');
  });

  it('transaction pooling with named statements: start-up refused, naming the settings', async () => {
    bouncer = await startPgBouncer({ poolMode: 'transaction', defaultPoolSize: 4 });
    const message = await bootError(startApp(bouncer.url(db.name)).then((s) => s.app));
    expect(message).toMatch(/transaction pool/);
    expect(message).toMatch(/preparedStatements: false/);
    expect(message).toMatch(/max_prepared_statements/);
  });

  it('transaction pooling under REPEATABLE READ (the database default): every key runs once, no 503, in every mode', async () => {
    await defaultIsolation(db, 'repeatable read');
    try {
      bouncer = await startPgBouncer({ poolMode: 'transaction', defaultPoolSize: 4 });
      const started = await startApp(bouncer.url(db.name), { preparedStatements: false });
      app = started.app;
      const through = new DataSource({ type: 'postgres', url: bouncer.url(db.name) });
      await through.initialize();
      const [{ transaction_isolation: level }] = await through.query('SHOW transaction_isolation');
      await through.destroy();
      expect(level).toBe('repeatable read');
      await expectOnce(await traffic(app, started.exec, 'txpool-rr'), 'txpool-rr');
    } finally {
      await db.dataSource.query(`ALTER DATABASE "${db.name}" RESET default_transaction_isolation`);
    }
  });

  it('session pooling keeps working with named statements', async () => {
    bouncer = await startPgBouncer({ poolMode: 'session', defaultPoolSize: 10 });
    const started = await startApp(bouncer.url(db.name));
    app = started.app;
    await expectOnce(await traffic(app, started.exec, 'session'), 'session');
  });
});
