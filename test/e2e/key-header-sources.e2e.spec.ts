/**
 * The key is read from `req.headers`, as the app sees the request, not from the socket's raw
 * header list: before, each of these setups ran every retry again with no claim and no record.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  Controller,
  type INestApplication,
  type MiddlewareConsumer,
  Module,
  type NestMiddleware,
  type NestModule,
  Post,
  Req,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import express from 'express';
import { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';

const exec = new Executions();
const noop = () => undefined;
type Headers = Record<string, string | string[] | undefined>;

@Controller('payments')
class PaymentsController {
  @Post()
  @Idempotent()
  charge(@Body() body: { amount: number }) {
    return { amount: body.amount, run: exec.hit('charge') };
  }
}

@Controller('orders')
class OrdersController {
  @Post()
  @Idempotent()
  pay(@Req() req: { merchant: string }, @Body() body: { amount: number }) {
    const secret = `receipt-of-${req.merchant}`;
    return { merchant: req.merchant, amount: body.amount, secret, run: exec.hit('order') };
  }
}

/** Older clients send X-Idempotency-Key: the app maps it onto the header the library reads. */
class LegacyKeyMiddleware implements NestMiddleware {
  use(req: { headers: Headers }, _res: unknown, next: () => void) {
    const legacy = req.headers['x-idempotency-key'];
    if (legacy !== undefined && req.headers['idempotency-key'] === undefined) {
      req.headers['idempotency-key'] = legacy;
    }
    next();
  }
}

/** Merchants authenticate with an API key (no req.user); the app namespaces their keys. */
class MerchantKeyMiddleware implements NestMiddleware {
  use(req: { headers: Headers; merchant?: string }, _res: unknown, next: () => void) {
    req.merchant = String(req.headers['x-api-key'] ?? '').slice(0, 4);
    const key = req.headers['idempotency-key'];
    if (typeof key === 'string') req.headers['idempotency-key'] = `${req.merchant}:${key}`;
    next();
  }
}

/**
 * The request a serverless adapter hands the app, as @h4ad/serverless-adapter 4.4.0 builds it
 * (its `ServerlessRequest`): `headers` set from the event, `rawHeaders` left empty.
 */
class ServerlessRequest extends IncomingMessage {
  ip = '127.0.0.1';
  constructor(
    o: { headers: Record<string, string>; body: Buffer },
    readonly body = o.body,
  ) {
    super({
      encrypted: true,
      readable: true,
      remoteAddress: '127.0.0.1',
      address: () => ({ port: 443 }),
      on: noop,
      removeListener: noop,
      removeEventListener: noop,
      end: noop,
      destroy: noop,
    } as never);
    Object.assign(this, { complete: true, httpVersion: '1.1', httpVersionMajor: 1 });
    Object.assign(this, { httpVersionMinor: 1, method: 'POST', url: '/payments' });
    this.headers = o.headers;
    this._read = () => {
      this.push(o.body);
      this.push(null);
    };
  }
}

/** Dispatches one event into the Express instance, as the adapter does, and reads the answer. */
function invoke(app: INestApplication, key: string, payload: unknown) {
  const body = Buffer.from(JSON.stringify(payload));
  const headers = {
    'content-type': 'application/json',
    'content-length': String(body.length),
    'idempotency-key': key,
  };
  const req = new ServerlessRequest({ headers, body });
  const res = new ServerResponse(req);
  const chunks: Buffer[] = [];
  res.assignSocket({
    _writableState: {},
    writable: true,
    on: noop,
    removeListener: noop,
    destroy: noop,
    cork: noop,
    uncork: noop,
    write: (data: Buffer | string, enc?: unknown, cb?: unknown) => {
      chunks.push(Buffer.from(data));
      const done = typeof enc === 'function' ? enc : cb;
      if (typeof done === 'function') done();
      return true;
    },
  } as never);
  const instance = app.getHttpAdapter().getInstance() as (q: unknown, r: unknown) => void;
  return new Promise<{ status: number; raw: string }>((resolve) => {
    res.on('finish', () =>
      resolve({ status: res.statusCode, raw: Buffer.concat(chunks).toString() }),
    );
    instance(req, res);
  });
}

const post = (url: string, path: string, headers: Record<string, string>) =>
  fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ amount: 500 }),
  }).then(async (r) => ({
    status: r.status,
    replayed: r.headers.get('idempotent-replayed'),
    body: await r.text(),
  }));

describe('where the key header comes from', () => {
  let db: MigratedDatabase;
  const apps: INestApplication[] = [];

  /** An app on the shared database; `listen` false for one driven without a socket. */
  async function start(module: object, setup: (app: INestApplication) => void, listen = true) {
    const app = await NestFactory.create(module as never, new ExpressAdapter(), {
      logger: false,
      bodyParser: false,
    });
    apps.push(app);
    setup(app);
    if (!listen) return { app, url: '' };
    await app.listen(0, '127.0.0.1');
    return { app, url: `http://127.0.0.1:${app.getHttpServer().address().port}` };
  }

  function appModule(configure?: (consumer: MiddlewareConsumer) => void) {
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [PaymentsController, OrdersController],
    })
    class KeyModule implements NestModule {
      configure(consumer: MiddlewareConsumer) {
        configure?.(consumer);
      }
    }
    return KeyModule;
  }

  beforeAll(async () => {
    db = await createMigratedDatabase('e12keys');
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await db?.drop();
  });

  it('a key a middleware maps from a legacy header protects the request', async () => {
    const module = appModule((c) => c.apply(LegacyKeyMiddleware).forRoutes('payments'));
    const { url } = await start(module, (app) => app.use(express.json()));
    const key = randomUUID();
    const before = exec.count('charge');
    const first = await post(url, '/payments', { 'x-idempotency-key': key });
    expect(first.status).toBe(201);
    const retry = await post(url, '/payments', { 'x-idempotency-key': key });
    expect(retry).toMatchObject({ replayed: 'true', body: first.body });
    expect(exec.count('charge') - before).toBe(1);
  });

  it("a key a middleware namespaces per merchant never answers one merchant with another's response", async () => {
    const module = appModule((c) => c.apply(MerchantKeyMiddleware).forRoutes('orders'));
    const { url } = await start(module, (app) => app.use(express.json()));
    const key = `order-${randomUUID()}`;
    const a = await post(url, '/orders', { 'idempotency-key': key, 'x-api-key': 'acme-secret' });
    expect(a.body).toContain('receipt-of-acme');
    const b = await post(url, '/orders', { 'idempotency-key': key, 'x-api-key': 'bolt-secret' });
    expect(b.status).toBe(201);
    expect(b.body).toContain('receipt-of-bolt');
    expect(await db.records('idempotency_key = $1', [`bolt:${key}`])).toHaveLength(1);
  });

  it('a JSON parser that keeps the raw bytes on req.raw (webhook signatures) changes nothing', async () => {
    const { url } = await start(appModule(), (app) =>
      app.use(
        express.json({
          verify: (req, _res, buf) => {
            (req as unknown as { raw: Buffer }).raw = buf;
          },
        }),
      ),
    );
    const key = randomUUID();
    const before = exec.count('charge');
    const first = await post(url, '/payments', { 'idempotency-key': key });
    const retry = await post(url, '/payments', { 'idempotency-key': key });
    expect(retry).toMatchObject({ status: 201, replayed: 'true', body: first.body });
    expect(exec.count('charge') - before).toBe(1);
  });

  it('a request from a serverless adapter, with headers but no rawHeaders, runs once per key', async () => {
    const { app } = await start(appModule(), (a) => a.use(express.json()), false);
    await app.init();
    const key = randomUUID();
    const before = exec.count('charge');
    const first = await invoke(app, key, { amount: 500 });
    expect(first.status).toBe(201);
    const retry = await invoke(app, key, { amount: 500 });
    expect(retry.status).toBe(201);
    expect(exec.count('charge') - before).toBe(1);
    expect(await db.records('idempotency_key = $1', [key])).toHaveLength(1);
  });
});
