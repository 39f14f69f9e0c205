/**
 * An app that watches its pool's connections (`pool.on('connect', c => c.on('error', ...))`, the
 * pg docs' way to log or alert on a connection lost unexpectedly). A claim given up on at
 * statementTimeoutMs (the database hangs) is the store's own decision, made by ending the
 * connection: the app's listener sees nothing. helper-87 found the pipeline's shared deadline
 * destroying the socket before ending the client, which pg reported as "Connection terminated
 * unexpectedly".
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';

const T = 600;

@Controller('pay')
class PayController {
  @Post()
  @Idempotent({ transactional: 'single', endpoint: 'pay' })
  async pay(@Body() body: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
    await (idem.manager as { query(t: string, v: unknown[]): Promise<unknown> }).query(
      'SELECT 1',
      [],
    );
    return { ref: body.ref };
  }

  @Post('lease')
  @Idempotent({ endpoint: 'lease' })
  lease(@Body() body: { ref: string }) {
    return { ref: body.ref };
  }
}

describe("the app's own connection error listener when a claim times out", () => {
  let db: MigratedDatabase;
  let proxy: TcpProxy;
  let pool: pg.Pool;
  let app: Awaited<ReturnType<typeof listenApp>>;
  const seen: string[] = [];

  beforeAll(async () => {
    db = await createMigratedDatabase('pipeline_error_event');
    proxy = TcpProxy.forUrl(db.url);
    await proxy.start();
    pool = new pg.Pool({ connectionString: proxy.wrap(db.url), max: 2 });
    pool.on('error', () => undefined);
    pool.on('connect', (client) => client.on('error', (e) => seen.push(e.message)));
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          pool,
          statementTimeoutMs: T,
          cleanup: { enabled: false },
          replayCache: false,
        }),
      ],
      controllers: [PayController],
    })
    class AppModule {}
    app = await listenApp(AppModule);
  }, 30_000);
  afterAll(async () => {
    await app?.close();
    await pool?.end().catch(() => undefined);
    await proxy?.stop();
    await db?.drop();
  });

  it.each([
    ['a lease claim (one statement, for comparison)', '/pay/lease'],
    ['a single-commit claim (pipelined)', '/pay'],
  ])(
    '%s given up on: 503, and no "unexpected" connection error reported to the app',
    async (_n, path) => {
      const warm = randomUUID();
      expect((await send(app.url, path, { key: warm, body: { ref: warm } })).status).toBe(201);
      seen.length = 0;
      proxy.blackhole();
      let status: number;
      try {
        status = (await send(app.url, path, { key: randomUUID(), body: { ref: 'x' } })).status;
        await new Promise((r) => setTimeout(r, 100));
      } finally {
        proxy.resume();
      }
      expect({ status, seen }).toEqual({ status: 503, seen: [] });
    },
  );
});
