import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  Controller,
  Module,
  Post,
  StreamableFile,
  type INestApplication,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { DataSource } from 'typeorm';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
  type IdempotencyModuleOptions,
} from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import {
  createMigratedDatabase,
  defaultIsolation,
  type MigratedDatabase,
} from '../fixtures/migrated-database.js';
import { Executions, type Platform } from '../fixtures/payments.fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LONG_ID = 'x'.repeat(300);

interface EdgeBody {
  note?: string;
  ref?: string;
  holdMs?: number;
}

function edgesController(exec: Executions) {
  @Controller('edges')
  class EdgesController {
    @Post('echo')
    @Idempotent()
    echo(@Body() body: EdgeBody) {
      return { note: body.note, n: exec.hit('echo') };
    }

    @Post('echo-tx')
    @Idempotent({ transactional: true })
    async echoTx(@Body() body: EdgeBody, @IdempotencyCtx() idem: IdempotencyContext) {
      await idem.manager!.query('INSERT INTO refs (ref) VALUES ($1)', [randomUUID()]);
      return { note: body.note, n: exec.hit('echo-tx') };
    }

    @Post('long-derived-id')
    @Idempotent({ transactionId: () => LONG_ID })
    longDerivedId() {
      return { n: exec.hit('long-derived-id') };
    }

    @Post('long-set-id')
    @Idempotent()
    longSetId(@IdempotencyCtx() idem: IdempotencyContext) {
      exec.hit('long-set-id');
      idem.setTransactionId(LONG_ID);
      return { unreachable: true };
    }

    /** The handler's writes break a DEFERRABLE constraint: only COMMIT finds out. */
    @Post('stream-deferred')
    @Idempotent({ transactional: true })
    async streamDeferred(@Body() body: EdgeBody, @IdempotencyCtx() idem: IdempotencyContext) {
      exec.hit('stream-deferred');
      await idem.manager!.query('INSERT INTO deferred_refs (ref) VALUES ($1), ($1)', [body.ref]);
      return new StreamableFile(
        Readable.from([Buffer.from('receipt-1'), Buffer.from('receipt-2')]),
      );
    }

    @Post('slow-tx')
    @Idempotent({ transactional: true, ttlSeconds: 5 })
    async slowTx(@Body() body: EdgeBody, @IdempotencyCtx() idem: IdempotencyContext) {
      await idem.manager!.query('INSERT INTO refs (ref) VALUES ($1)', [body.ref]);
      await sleep(body.holdMs ?? 0);
      return { n: exec.hit('slow-tx') };
    }
  }
  return EdgesController;
}

async function startApp(
  platform: Platform,
  dataSource: DataSource,
  exec: Executions,
  options: Partial<IdempotencyModuleOptions> = {},
) {
  @Module({
    imports: [
      IdempotencyModule.forRoot({
        dataSource,
        replayCache: false,
        cleanup: { enabled: false },
        ...options,
      }),
    ],
    controllers: [edgesController(exec)],
  })
  class EdgesModule {}
  return listenApp(EdgesModule, platform);
}

async function createEdgesDatabase(prefix: string): Promise<MigratedDatabase> {
  const db = await createMigratedDatabase(prefix);
  await db.dataSource.query(`CREATE TABLE refs (ref text PRIMARY KEY)`);
  await db.dataSource.query(
    `CREATE TABLE deferred_refs (ref text, UNIQUE (ref) DEFERRABLE INITIALLY DEFERRED)`,
  );
  return db;
}

describe.each<Platform>(['express', 'fastify'])(
  'responses PostgreSQL refuses, on %s',
  (platform) => {
    let db: MigratedDatabase;
    let app: INestApplication;
    let url: string;
    const exec = new Executions();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);

    beforeAll(async () => {
      db = await createEdgesDatabase(`edges_${platform}`);
      ({ app, url } = await startApp(platform, db.dataSource, exec));
      process.on('unhandledRejection', onUnhandled);
    });
    afterAll(async () => {
      process.off('unhandledRejection', onUnhandled);
      await app?.close();
      await db?.drop();
    });
    afterEach(() => expect(unhandled).toEqual([]));

    const record = async (key: string) => (await db.records('idempotency_key = $1', [key]))[0];
    /** JSON text with a lone surrogate escape: valid JSON, refused by jsonb. */
    const LONE_SURROGATE = '{"note":"\\ud800"}';

    it.each(['echo', 'echo-tx'])(
      'stores and replays the raw bytes of a body jsonb refuses (lone surrogate), on /%s',
      async (route) => {
        const key = randomUUID();
        const first = await send(url, `/edges/${route}`, { key, body: LONE_SURROGATE });
        expect(first.status).toBe(201);
        expect(first.text).toContain('\\ud800');
        const again = await send(url, `/edges/${route}`, { key, body: LONE_SURROGATE });
        expect(again.status).toBe(201);
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.body.equals(first.body)).toBe(true);
        expect(exec.count(route)).toBe(1);
        expect(await record(key)).toMatchObject({ status: 'completed', response_body: null });
      },
    );

    it('stores the record without a transaction id the column cannot hold (derived id of 300 chars)', async () => {
      const key = randomUUID();
      const first = await send(url, '/edges/long-derived-id', { key });
      expect(first.status).toBe(201);
      const again = await send(url, '/edges/long-derived-id', { key });
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(await record(key)).toMatchObject({ status: 'completed', transaction_id: null });
      expect(exec.count('long-derived-id')).toBe(1);
    });

    it('refuses an unusable transaction id inside the handler: 500, and the key is released', async () => {
      const key = randomUUID();
      expect((await send(url, '/edges/long-set-id', { key })).status).toBe(500);
      expect(await record(key)).toBeUndefined();
    });

    it('streamed response whose COMMIT fails: 503 before any byte of the stream, key released, process alive', async () => {
      const key = randomUUID();
      const ref = randomUUID();
      const res = await send(url, '/edges/stream-deferred', { key, body: { ref } });
      expect(res.status).toBe(503);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json().code).toBe('idempotency_store_unavailable');
      expect(res.text).not.toContain('receipt');
      expect(
        await db.dataSource.query('SELECT * FROM deferred_refs WHERE ref = $1', [ref]),
      ).toEqual([]);
      expect(await record(key)).toBeUndefined();
      // Still serving.
      expect((await send(url, '/edges/echo', { key: randomUUID(), body: {} })).status).toBe(201);
    });
  },
);

describe('transactional completion time (express)', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;
  const exec = new Executions();

  beforeAll(async () => {
    db = await createEdgesDatabase('edges_clock');
    ({ app, url } = await startApp('express', db.dataSource, exec));
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('takes completed_at and expires_at from the moment of completion, not the transaction start', async () => {
    const key = randomUUID();
    const res = await send(url, '/edges/slow-tx', { key, body: { ref: key, holdMs: 1500 } });
    expect(res.status).toBe(201);
    const [row] = await db.records('idempotency_key = $1', [key]);
    const created = new Date(row.created_at).getTime();
    const completed = new Date(row.completed_at).getTime();
    expect(completed - created).toBeGreaterThanOrEqual(1400);
    expect(new Date(row.expires_at).getTime() - completed).toBeCloseTo(5000, -2);
  });
});

describe.each(['repeatable read', 'serializable'] as const)(
  'transactional mode under %s (express)',
  (isolation) => {
    let db: MigratedDatabase;
    let app: INestApplication;
    let url: string;
    const exec = new Executions();

    beforeAll(async () => {
      db = await createEdgesDatabase(`edges_iso`);
      await defaultIsolation(db, isolation);
      const dataSource = db.newDataSource();
      await dataSource.initialize();
      // A lease of 1 s is renewed every 333 ms: a handler of 1.5 s sees several renewals.
      ({ app, url } = await startApp('express', dataSource, exec, { leaseSeconds: 1 }));
    });
    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    it('completes a handler that outlives its lease; a duplicate meanwhile gets 409, then the replay', async () => {
      const key = randomUUID();
      const first = send(url, '/edges/slow-tx', { key, body: { ref: key, holdMs: 1500 } });
      await sleep(1200); // past the 1 s lease: only the live transaction protects the claim now
      const during = await send(url, '/edges/slow-tx', { key, body: { ref: key, holdMs: 1500 } });
      expect(during.status).toBe(409);
      expect(during.json().code).toBe('request_in_progress');
      const done = await first;
      expect(done.status).toBe(201);
      const again = await send(url, '/edges/slow-tx', { key, body: { ref: key, holdMs: 1500 } });
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body.equals(done.body)).toBe(true);
      expect(exec.count('slow-tx')).toBe(1);
      expect(await db.dataSource.query('SELECT ref FROM refs WHERE ref = $1', [key])).toEqual([
        { ref: key },
      ]);
    });
  },
);
