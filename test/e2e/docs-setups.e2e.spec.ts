import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Controller,
  Get,
  GatewayTimeoutException,
  Module,
  Post,
  Res,
  UseFilters,
  UseInterceptors,
  type INestApplication,
} from '@nestjs/common';
import { HttpAdapterHost, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import {
  CardDeclinedError,
  CardDeclinedFilter,
  CatchEverythingFilter,
  timeoutInterceptor,
} from '../fixtures/docs-setups.fixture.js';
import { send } from '../fixtures/http-client.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Executions, type Platform } from '../fixtures/payments.fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The global timeout (the docs' TimeoutInterceptor) and the handlers slower than it. */
const TIMEOUT_MS = 400;
const HANDLER_MS = 900;

function docsController(exec: Executions) {
  @Controller('docs')
  class DocsController {
    @Post('slow')
    @Idempotent()
    async slow() {
      await sleep(HANDLER_MS);
      return { charged: exec.hit('slow') };
    }

    @Post('slow-boom')
    @Idempotent()
    async slowBoom() {
      exec.hit('slow-boom');
      await sleep(HANDLER_MS);
      throw new Error('processor exploded after the timeout');
    }

    @Post('gateway')
    @Idempotent()
    @UseInterceptors(timeoutInterceptor(TIMEOUT_MS / 2, () => new GatewayTimeoutException()))
    async gateway() {
      await sleep(HANDLER_MS);
      return { charged: exec.hit('gateway') };
    }

    /** The other decorator order: the timeout would sit inside ours if ours were not innermost. */
    @Post('gateway-below')
    @UseInterceptors(timeoutInterceptor(TIMEOUT_MS / 2, () => new GatewayTimeoutException()))
    @Idempotent()
    async gatewayBelow() {
      await sleep(HANDLER_MS);
      return { charged: exec.hit('gateway-below') };
    }

    @Post('abandoned')
    @Idempotent()
    abandoned() {
      return { charged: exec.hit('abandoned') };
    }

    @Post('own-then-throw')
    @Idempotent()
    ownThenThrow(@Res() res: any) {
      const body = JSON.stringify({ charged: exec.hit('own-then-throw') });
      if (typeof res.code === 'function') {
        res.code(201).header('content-type', 'application/json').send(body);
      } else res.status(201).type('application/json').send(body);
      throw new Error('bookkeeping failed after the response was sent');
    }

    @Post('declined')
    @Idempotent()
    @UseFilters(CardDeclinedFilter)
    declined() {
      throw new CardDeclinedError(`insufficient funds #${exec.hit('declined')}`);
    }

    @Post('gzip')
    @Idempotent()
    gzip(@Res() res: any) {
      const body = gzipSync(JSON.stringify({ receipt: exec.hit('gzip') }));
      const headers = {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'cache-control': 'private, max-age=60',
        vary: 'Accept-Encoding',
      };
      if (typeof res.code === 'function') res.code(201).headers(headers).send(body);
      else res.status(201).set(headers).send(body);
    }

    @Get('quote')
    @Idempotent()
    quote() {
      exec.hit('quote');
      return { price: 42 };
    }
  }

  @Controller('filtered')
  @UseFilters(CatchEverythingFilter)
  class FilteredController {
    @Post()
    @Idempotent({ required: true })
    create() {
      return { n: exec.hit('filtered') };
    }
  }
  return [DocsController, FilteredController];
}

describe.each<Platform>(['express', 'fastify'])('the NestJS docs setups on %s', (platform) => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;
  const exec = new Executions();

  beforeAll(async () => {
    db = await createMigratedDatabase(`docs_${platform}`);
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          replayCache: false,
          cleanup: { enabled: false },
        }),
      ],
      controllers: docsController(exec),
    })
    class DocsModule {}
    const adapter = platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter();
    app = await NestFactory.create(DocsModule, adapter as never, {
      logger: process.env.DEBUG_DOCS ? ['error', 'warn', 'log'] : false,
    });
    app.useGlobalInterceptors(timeoutInterceptor(TIMEOUT_MS));
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
    expect(app.get(HttpAdapterHost).httpAdapter).toBeDefined();
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const record = async (key: string) => (await db.records('idempotency_key = $1', [key]))[0];

  it('keeps the key in progress while a timed-out handler still runs, and never stores the 408', async () => {
    const key = randomUUID();
    const started = Date.now();
    const first = await send(url, '/docs/slow', { key });
    expect(first.status).toBe(408);
    const during = await send(url, '/docs/slow', { key });
    expect(Date.now() - started).toBeLessThan(HANDLER_MS);
    expect(during.status).toBe(409);
    expect(during.json().code).toBe('request_in_progress');

    await sleep(HANDLER_MS - (Date.now() - started));
    // The outcome is recorded once the handler settles; a loaded machine may take a moment.
    for (let i = 0; i < 100 && (await record(key))?.status !== 'completed'; i++) await sleep(50);
    const after = await send(url, '/docs/slow', { key });
    expect(after.status).toBe(409);
    expect(after.json()).toMatchObject({
      code: 'idempotency_response_not_replayable',
      original_status: 201,
    });
    expect(exec.count('slow')).toBe(1);
    expect(await record(key)).toMatchObject({
      status: 'completed',
      status_code: 201,
      response_raw: null,
    });
  });

  it.each(['gateway', 'gateway-below'])(
    'a 504 from a route timeout does not release the key: three tries, one charge (/%s)',
    async (route) => {
      const key = randomUUID();
      const started = Date.now();
      const answers = [(await send(url, `/docs/${route}`, { key })).status];
      answers.push((await send(url, `/docs/${route}`, { key })).status);
      await sleep(HANDLER_MS + 200 - (Date.now() - started));
      answers.push((await send(url, `/docs/${route}`, { key })).status);
      expect(answers).toEqual([504, 409, 409]);
      expect(exec.count(route)).toBe(1);
    },
  );

  it('releases the key once a timed-out handler fails, so a retry runs again', async () => {
    const key = randomUUID();
    expect((await send(url, '/docs/slow-boom', { key })).status).toBe(408);
    expect(await record(key)).toMatchObject({ status: 'in_progress' });
    await sleep(HANDLER_MS);
    expect(await record(key)).toBeUndefined();
    expect((await send(url, '/docs/slow-boom', { key })).status).toBe(408);
    expect(exec.count('slow-boom')).toBe(2);
  });

  it('frees a claim whose caller gave up before the handler started (timeout during the claim)', async () => {
    const key = randomUUID();
    // An uncommitted insert of the same scope makes the app's claim wait on the unique index.
    const blocker = db.dataSource.createQueryRunner();
    await blocker.startTransaction();
    await blocker.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, user_id, request_hash, owner_token, locked_until, expires_at)
       VALUES ($1, 'POST /docs/abandoned', '', repeat('0', 64), gen_random_uuid(), now(), now())`,
      [key],
    );
    try {
      expect((await send(url, '/docs/abandoned', { key })).status).toBe(408);
    } finally {
      await blocker.rollbackTransaction();
      await blocker.release();
    }
    // The claim now goes through, after its caller left: it must be released, not left running.
    await sleep(500);
    expect(await record(key)).toBeUndefined();
    expect(exec.count('abandoned')).toBe(0);
  });

  it('@Res() handler that sends then throws: what the client got first is what is stored', async () => {
    const key = randomUUID();
    const first = await send(url, '/docs/own-then-throw', { key });
    expect(first.status).toBe(201);
    expect(first.json()).toEqual({ charged: expect.any(Number) });
    const again = await send(url, '/docs/own-then-throw', { key });
    expect(again.status).toBe(201);
    expect(again.body.equals(first.body)).toBe(true);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(exec.count('own-then-throw')).toBe(1);
  });

  it('stores a domain error an exception filter turns into 402, as the client received it', async () => {
    const key = randomUUID();
    const first = await send(url, '/docs/declined', { key });
    expect(first.status).toBe(402);
    const again = await send(url, '/docs/declined', { key });
    expect(again.status).toBe(402);
    expect(again.body.equals(first.body)).toBe(true);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(exec.count('declined')).toBe(1);
  });

  it('replays a body the handler compressed itself with its Content-Encoding, Cache-Control and Vary', async () => {
    const key = randomUUID();
    const first = await send(url, '/docs/gzip', { key });
    const again = await send(url, '/docs/gzip', { key });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.equals(first.body)).toBe(true);
    expect(JSON.parse(gunzipSync(again.body).toString())).toEqual({ receipt: expect.any(Number) });
    expect(exec.count('gzip')).toBe(1);
    for (const name of ['content-encoding', 'cache-control', 'vary']) {
      expect(again.headers[name]).toBe(first.headers[name]);
    }
    expect(again.headers['content-encoding']).toBe('gzip');
  });

  it("sets problem headers only on its own problem body: an app filter's rewrite keeps its own type", async () => {
    const rewritten = await send(url, '/filtered', {});
    expect(rewritten.status).toBe(400);
    expect(rewritten.headers['content-type']).toMatch(/^application\/json/);
    expect(rewritten.json()).toMatchObject({ statusCode: 400, path: '/filtered' });

    const own = await send(url, '/docs/slow', { key: 'has space' });
    expect(own.status).toBe(400);
    expect(own.headers['content-type']).toMatch(/^application\/problem\+json/);
  });

  if (platform === 'express') {
    it('completes the key on a 304 without a body: the handler ran, so a retry never runs it again', async () => {
      const probe = await send(url, '/docs/quote', { method: 'GET' });
      const etag = String(probe.headers.etag);
      expect(etag).toMatch(/^W\//);
      const runsBefore = exec.count('quote');
      const key = randomUUID();
      const conditional = await send(url, '/docs/quote', {
        method: 'GET',
        key,
        headers: [['If-None-Match', etag]],
      });
      expect(conditional.status).toBe(304);
      expect(await record(key)).toMatchObject({
        status: 'completed',
        status_code: 304,
        response_raw: null,
      });
      const unconditional = await send(url, '/docs/quote', { method: 'GET', key });
      expect(unconditional.status).toBe(409);
      expect(unconditional.json()).toMatchObject({
        code: 'idempotency_response_not_replayable',
        original_status: 304,
      });
      expect(exec.count('quote')).toBe(runsBefore + 1);
    });
  }
});
