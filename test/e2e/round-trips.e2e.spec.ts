import { afterAll, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import {
  createMigratedDatabase,
  defaultIsolation,
  type MigratedDatabase,
} from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { startFixtureApp, type FixtureApp } from '../fixtures/payments.fixture.js';
import { IDEMPOTENCY_RESOLVED_OPTIONS } from '../../lib/idempotency-internal.constants.js';
import { IdempotencyInterceptor } from '../../lib/transports/idempotency.interceptor.js';
import { Controller, Module, Post } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../lib/index.js';

@Controller()
class SingleCommitController {
  @Post('single')
  @Idempotent({ transactional: 'single' })
  async single(@IdempotencyCtx() idem: IdempotencyContext) {
    const [{ n }] = await idem.manager!.query('SELECT $1::int AS n', [7]);
    return { n };
  }
}

async function startSingleCommitApp(dataSource: DataSource) {
  @Module({
    imports: [
      IdempotencyModule.forRoot({
        dataSource,
        replayCache: false,
        replayAuditFlushMs: 3_600_000,
        cleanup: { enabled: false },
      }),
    ],
    controllers: [SingleCommitController],
  })
  class SingleCommitModule {}
  return listenApp(SingleCommitModule);
}

/**
 * Every statement the app sends goes through the pool of its DataSource, so wrapping the `query`
 * of each client it hands out counts exactly what each request path costs: each statement's text
 * in `sent`, and in `pipelined` the index of each one sent without waiting for the one before it
 * (same round trip).
 */
function countStatements(
  appDataSource: DataSource,
  sent: string[],
  pipelined: number[],
): { checkouts: number } {
  const counts = { checkouts: 0 };
  const pool = (
    appDataSource.driver as unknown as {
      master: { connect: (...a: any[]) => Promise<any> };
    }
  ).master;
  // Every statement, by pool.query() or on a checked-out client, is one client.query().
  const counted = new WeakSet<object>();
  const connect = pool.connect.bind(pool);
  pool.connect = async (...args: any[]) => {
    counts.checkouts++;
    const client = await connect(...args);
    if (!counted.has(client)) {
      counted.add(client);
      const query = client.query.bind(client);
      client.query = (config: any, ...rest: any[]) => {
        sent.push(typeof config === 'string' ? config : config.text);
        if (client.pipeline) pipelined.push(sent.length - 1);
        return query(config, ...rest);
      };
    }
    return client;
  };
  return counts;
}

/** A single-commit replay: BEGIN, the scope's lock, the lookup, and a ROLLBACK not waited for. */
const SINGLE_COMMIT_REPLAY = ['BEGIN', 'SELECT', 'SELECT', 'ROLLBACK'];

/** The first word of each statement a single-commit replay sends (after its first call). */
async function singleCommitReplay(url: string, sent: string[]): Promise<string[]> {
  const key = randomUUID();
  await send(url, '/single', { key });
  sent.length = 0;
  const replay = await send(url, '/single', { key });
  expect(replay.headers['idempotent-replayed']).toBe('true');
  // The ROLLBACK is not awaited by the request: wait for it.
  await new Promise((r) => setTimeout(r, 50));
  return sent.map((s) => s.split(' ')[0]);
}

/** The round-trip budget, counted by `countStatements`. */
describe('round-trip budget', () => {
  let db: MigratedDatabase;
  let f: FixtureApp;
  let single: { url: string; close: () => Promise<void> };
  const sent: string[] = [];
  const pipelined: number[] = [];

  beforeAll(async () => {
    db = await createMigratedDatabase('roundtrips');
    const appDataSource = db.newDataSource();
    await appDataSource.initialize();
    countStatements(appDataSource, sent, pipelined);
    f = await startFixtureApp({
      platform: 'express',
      dataSource: appDataSource,
      options: { replayAuditFlushMs: 3_600_000, replayCache: false },
    });
    single = await startSingleCommitApp(appDataSource);
  });
  afterAll(async () => {
    await single?.close();
    await f?.close();
    await db?.drop();
  });
  beforeEach(() => {
    sent.length = 0;
    pipelined.length = 0;
  });

  it('a first call costs 2 statements: the claim and the completion', async () => {
    expect((await send(f.url, '/charges', { key: randomUUID(), body: { amount: 1 } })).status).toBe(
      201,
    );
    expect(sent).toHaveLength(2);
    expect(sent[0]).toMatch(
      /^WITH lock AS \(SELECT pg_try_advisory_xact_lock\(\$8\) AS locked\), ins AS \(\s*INSERT INTO .* ON CONFLICT \(idempotency_key, endpoint, user_id\) DO NOTHING/s,
    );
    expect(sent[1]).toMatch(/^UPDATE .* SET status = 'completed'/s);
  });

  it("single-commit: a first call is one transaction, one COMMIT, three round trips: BEGIN + the scope's lock + lookup, the handler's statement, the completed record + COMMIT", async () => {
    const first = await send(single.url, '/single', { key: randomUUID() });
    expect(first.status).toBe(201);
    expect(sent).toHaveLength(6);
    expect(sent[0]).toBe('BEGIN');
    expect(sent[1]).toMatch(
      /^SELECT pg_try_advisory_xact_lock\(\$1\) AS locked,\s+current_setting\('transaction_isolation'\)/,
    );
    expect(sent[2]).toMatch(/^SELECT k\.id, .* LEFT JOIN .* ON k\.idempotency_key = \$1/s);
    expect(sent[3]).toBe('SELECT $1::int AS n');
    expect(sent[4]).toMatch(/^INSERT INTO .*'completed'.*RETURNING/s);
    expect(sent[5]).toBe('COMMIT');
    expect(sent.filter((s) => /^(UPDATE|COMMIT)/.test(s))).toEqual(['COMMIT']);
    // Three round trips: BEGIN + lock + lookup, the handler's statement, the record + COMMIT.
    expect(pipelined).toEqual([0, 1, 2, 4, 5]);
  });

  it('single-commit: a replay costs one round trip (BEGIN, lock, lookup) and a ROLLBACK not waited for', async () => {
    expect(await singleCommitReplay(single.url, sent)).toEqual(SINGLE_COMMIT_REPLAY);
  });

  it('a replay costs 1 statement', async () => {
    const key = randomUUID();
    await send(f.url, '/charges', { key, body: { amount: 1 } });
    sent.length = 0;
    const replay = await send(f.url, '/charges', { key, body: { amount: 1 } });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(sent).toHaveLength(1);
  });

  it('with the replay cache (the default), a repeated replay costs 0', async () => {
    const cached = await startFixtureApp({
      platform: 'express',
      dataSource: f.app.get(IDEMPOTENCY_RESOLVED_OPTIONS).dataSource,
    });
    try {
      const key = randomUUID();
      const first = await send(cached.url, '/charges', { key, body: { amount: 1 } });
      sent.length = 0;
      const replay = await send(cached.url, '/charges', { key, body: { amount: 1 } });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body.equals(first.body)).toBe(true);
      expect(sent).toEqual([]);
      // A different request under the key still goes to the database (and is refused there).
      expect((await send(cached.url, '/charges', { key, body: { amount: 2 } })).status).toBe(409);
      expect(sent).toHaveLength(1);
    } finally {
      await cached.close();
    }
  });

  it('an in-progress conflict and a mismatch cost 1 statement each', async () => {
    const key = randomUUID();
    const slow = send(f.url, '/slow', { key, body: { ms: 300 } });
    await new Promise((r) => setTimeout(r, 100));
    sent.length = 0;
    expect((await send(f.url, '/slow', { key, body: { ms: 300 } })).status).toBe(409);
    expect(sent).toHaveLength(1);
    await slow;
    sent.length = 0;
    expect((await send(f.url, '/slow', { key, body: { ms: 1 } })).status).toBe(409);
    expect(sent).toHaveLength(1);
  });

  it('an undecorated route never even enters the interceptor', async () => {
    const intercept = jest.spyOn(IdempotencyInterceptor.prototype, 'intercept');
    try {
      await send(f.url, '/plain', { key: randomUUID() });
      expect(intercept).not.toHaveBeenCalled();
      await send(f.url, '/charges', { body: { amount: 1 } });
      expect(intercept).toHaveBeenCalledTimes(1);
    } finally {
      intercept.mockRestore();
    }
  });

  it('a decorated route without a key, and an undecorated route, cost 0', async () => {
    await send(f.url, '/charges', { body: { amount: 1 } });
    await send(f.url, '/plain', { key: randomUUID() });
    expect(sent).toEqual([]);
  });

  it('a handler faster than a third of the lease never renews it', async () => {
    await send(f.url, '/slow', { key: randomUUID(), body: { ms: 200 } });
    expect(
      sent.filter((s) => /locked_until = now\(\) \+/.test(s) && s.startsWith('UPDATE')),
    ).toEqual([]);
    expect(sent).toHaveLength(2);
  });
});

describe('round-trip budget under REPEATABLE READ (default_transaction_isolation of the database)', () => {
  let db: MigratedDatabase;
  let single: { url: string; close: () => Promise<void> };
  const sent: string[] = [];
  const pipelined: number[] = [];
  let counts: { checkouts: number };

  beforeAll(async () => {
    db = await createMigratedDatabase('roundtrips_rr');
    await defaultIsolation(db, 'repeatable read');
    const appDataSource = db.newDataSource();
    await appDataSource.initialize();
    counts = countStatements(appDataSource, sent, pipelined);
    single = await startSingleCommitApp(appDataSource);
  });
  afterAll(async () => {
    await single?.close();
    await db?.drop();
  });
  beforeEach(() => {
    sent.length = 0;
    pipelined.length = 0;
    counts.checkouts = 0;
  });

  it("single-commit: a first call probes the scope's unique index under a savepoint (rolled back, released), on its own connection: four round trips", async () => {
    expect((await send(single.url, '/single', { key: randomUUID() })).status).toBe(201);
    expect(sent.map((s) => s.split(/\s/)[0])).toEqual([
      'BEGIN',
      'SELECT',
      'SELECT',
      'SAVEPOINT',
      'INSERT',
      'ROLLBACK',
      'RELEASE',
      'SELECT',
      'INSERT',
      'COMMIT',
    ]);
    expect(sent[4]).toMatch(/ON CONFLICT \(idempotency_key, endpoint, user_id\) DO NOTHING$/);
    expect(sent[5]).toBe('ROLLBACK TO SAVEPOINT idem_snapshot_probe');
    // BEGIN + lock + lookup; the probe; the handler's statement; the record + COMMIT.
    expect(pipelined).toEqual([0, 1, 2, 3, 4, 5, 6, 8, 9]);
    expect(counts.checkouts).toBe(1);
  });

  it('single-commit: a replay costs what it costs under READ COMMITTED', async () => {
    expect(await singleCommitReplay(single.url, sent)).toEqual(SINGLE_COMMIT_REPLAY);
  });
});
