import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Inject, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { randomUUID } from 'node:crypto';
import { EntitySchema, type Repository } from 'typeorm';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
  ProblemCode,
} from '../../lib/index.js';
import { send, type RawResponse } from '../fixtures/http-client.js';
import { LogCapture } from '../fixtures/log-capture.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Account {
  id: number;
  balance: number;
}
const AccountSchema = new EntitySchema<Account>({
  name: 'Account',
  tableName: 'accounts',
  columns: { id: { type: Number, primary: true }, balance: { type: Number } },
});

interface ChargeBody {
  ref: string;
}

/** How a handler hangs, by ref: idle in its transaction past the bound, or in a statement. */
const hangs = new Map<string, 'idle' | 'statement'>();
/** What became of the write a handler tried after waking past the bound. */
const lateWrites = new Map<string, 'committed' | 'refused'>();
const BOUND_SECONDS = 3;
/** Handlers inside their transaction, waiting for each other before they read the account. */
let arrived = 0;

function chargesController() {
  @Controller('charges')
  class ChargesController {
    constructor(@Inject('ACCOUNTS') private readonly accounts: Repository<Account>) {}

    @Post()
    @Idempotent({ transactional: 'single' })
    async charge(@Body() body: ChargeBody, @IdempotencyCtx() idem: IdempotencyContext) {
      await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref]);
      const hang = hangs.get(body.ref);
      if (hang === 'idle') {
        await sleep(BOUND_SECONDS * 1000 + 1000);
        await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref]).then(
          () => lateWrites.set(body.ref, 'committed'),
          () => lateWrites.set(body.ref, 'refused'),
        );
      }
      if (hang === 'statement') await idem.manager!.query('SELECT pg_sleep(3600)');
      // Every transaction that could open is open before any handler reads through the pool.
      arrived++;
      for (const until = Date.now() + 800; arrived < 3 && Date.now() < until;) await sleep(20);
      const account = await this.accounts.findOneBy({ id: 1 });
      return { ref: body.ref, balance: account?.balance };
    }
  }
  return ChargesController;
}

/** A request that has not answered in `ms` fails the test instead of hanging it. */
function within(ms: number, pending: Promise<RawResponse>): Promise<RawResponse> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([pending, late]).finally(() => clearTimeout(timer));
}

describe('single-commit mode on a small pool, handlers also using the app DataSource', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;
  const boundSeconds = BOUND_SECONDS;
  const logs = new LogCapture();

  beforeAll(async () => {
    db = await createMigratedDatabase('single_pool');
    await db.dataSource.query(`CREATE TABLE ledger (ref text NOT NULL)`);
    await db.dataSource.query(`CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)`);
    await db.dataSource.query(`INSERT INTO accounts VALUES (1, 100)`);
    const dataSource = db.newDataSource({ entities: [AccountSchema], extra: { max: 3 } });
    await dataSource.initialize();
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource,
          cleanup: { enabled: false },
          replayCache: false,
          singleCommitMaxSeconds: boundSeconds,
        }),
      ],
      controllers: [chargesController()],
      providers: [{ provide: 'ACCOUNTS', useValue: dataSource.getRepository(AccountSchema) }],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, new ExpressAdapter(), { logger: logs });
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
    close = () => app.close();
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  const ledger = async (ref: string) =>
    (await db.dataSource.query(`SELECT ref FROM ledger WHERE ref = $1`, [ref])).length;
  const charge = (key: string, ref: string) => send(url, '/charges', { key, body: { ref } });

  it('warns at start-up that a pool of 3 is too small for single-commit routes', async () => {
    const warnings = logs.of('Idempotency', 'warn').map((l) => l.message);
    expect(warnings).toEqual([expect.stringContaining('on a pool of 3')]);
    expect(warnings[0]).toContain('at least 4 connections');

    const roomy = db.newDataSource({ extra: { max: 4 } });
    await roomy.initialize();
    @Module({
      imports: [IdempotencyModule.forRoot({ dataSource: roomy, cleanup: { enabled: false } })],
      controllers: [chargesController()],
      providers: [{ provide: 'ACCOUNTS', useValue: {} }],
    })
    class RoomyModule {}
    const quiet = new LogCapture();
    const app = await NestFactory.create(RoomyModule, new ExpressAdapter(), { logger: quiet });
    await app.init();
    await app.close();
    expect(quiet.of('Idempotency', 'warn')).toEqual([]);
  });

  it('completes 3 concurrent requests on a pool of 3', async () => {
    arrived = 0;
    const refs = [randomUUID(), randomUUID(), randomUUID()];
    const answers = await Promise.all(refs.map((ref) => within(15_000, charge(randomUUID(), ref))));
    expect(answers.map((a) => a.status)).toEqual([201, 201, 201]);
    expect(answers.map((a) => a.json().balance)).toEqual([100, 100, 100]);
    for (const ref of refs) expect(await ledger(ref)).toBe(1);
  });

  it.each(['idle', 'statement'] as const)(
    'rolls back a handler hung (%s) past singleCommitMaxSeconds: 503, key free, others unaffected',
    async (how) => {
      const key = randomUUID();
      const ref = randomUUID();
      hangs.set(ref, how);
      const started = Date.now();
      const hung = await within(15_000, charge(key, ref));
      expect(Date.now() - started).toBeGreaterThanOrEqual(boundSeconds * 1000 - 100);
      expect(hung.status).toBe(503);
      expect(hung.headers['retry-after']).toBeDefined();
      expect(hung.json()).toMatchObject({ code: ProblemCode.StoreUnavailable });
      expect(hung.json().detail).toContain('singleCommitMaxSeconds');
      expect(await ledger(ref)).toBe(0);
      expect(await db.records('idempotency_key = $1', [key])).toEqual([]);

      // The key is free at once, and the pool still serves concurrent requests.
      hangs.delete(ref);
      arrived = 0;
      const retry = within(15_000, charge(key, ref));
      const others = [randomUUID(), randomUUID()].map((r) =>
        within(15_000, charge(randomUUID(), r)),
      );
      expect((await retry).status).toBe(201);
      expect((await Promise.all(others)).map((a) => a.status)).toEqual([201, 201]);
      expect(await ledger(ref)).toBe(1);
      if (how === 'idle') {
        // The hung handler wakes and writes through its manager: that write never lands.
        while (!lateWrites.has(ref)) await sleep(50);
        expect(lateWrites.get(ref)).toBe('refused');
        expect(await ledger(ref)).toBe(1);
      }
    },
  );
});
