import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  Controller,
  Get,
  Headers,
  HostParam,
  HttpCode,
  type INestApplication,
  Module,
  Post,
  Version,
  VersioningType,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { postWithHost as post } from '../fixtures/host-request.js';
import { Executions, type Platform } from '../fixtures/payments.fixture.js';

/** Longer than the endpoint column (255), as a deep REST route under a global prefix can be. */
const LONG_PATH = `billing/${'customer-subscription-invoices'.repeat(10)}`;
const env: Record<string, string | undefined> = {};

function controllers(exec: Executions) {
  @Controller({ host: ':tenant.example.com', path: 'tenant-charges' })
  class TenantController {
    @Post()
    @Idempotent()
    charge(@HostParam('tenant') tenant: string, @Body() body: { amount: number }) {
      return { tenant, amount: body.amount, run: exec.hit('tenant', tenant) };
    }
  }

  @Controller({ host: [':tenant.a.example', ':tenant.b.example'], path: 'multi-host' })
  class MultiHostController {
    @Post()
    @Idempotent()
    charge(@Headers('host') host: string) {
      return { host, run: exec.hit('multi', host) };
    }
  }

  @Controller('not-modified')
  class NotModifiedController {
    @Get()
    @HttpCode(304)
    @Idempotent()
    check() {
      exec.hit('304');
      return '';
    }
  }

  @Controller('versioned')
  class VersionedController {
    @Post()
    @Version('1')
    @Idempotent()
    v1(@Body() body: { amount: number }) {
      return { version: 1, amount: body.amount, run: exec.hit('v1') };
    }

    @Post()
    @Version('2')
    @Idempotent()
    v2(@Body() body: { amount: number }) {
      return { version: 2, amount: body.amount, run: exec.hit('v2') };
    }
  }

  @Controller(LONG_PATH)
  class LongController {
    @Post()
    @Idempotent()
    charge() {
      return { run: exec.hit('long') };
    }
  }

  @Controller('refunds')
  @Idempotent({ required: true, ttlSeconds: 3600 })
  class RefundsController {
    // What `{ required: config.strict, ttlSeconds: config.ttl }` gives when neither is set.
    @Post()
    @Idempotent({ required: env.STRICT === 'yes' || undefined, ttlSeconds: undefined })
    refund() {
      return { run: exec.hit('refund') };
    }
  }

  return [
    TenantController,
    MultiHostController,
    NotModifiedController,
    VersionedController,
    LongController,
    RefundsController,
  ];
}

describe.each<Platform>(['express', 'fastify'])('what a request addresses, on %s', (platform) => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;
  const exec = new Executions();

  beforeAll(async () => {
    db = await createMigratedDatabase(`addr_${platform}`);
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: controllers(exec),
    })
    class AddressingModule {}
    const adapter = platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter();
    app = await NestFactory.create(AddressingModule, adapter as never, { logger: false });
    app.enableVersioning({ type: VersioningType.HEADER, header: 'x-api-version' });
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it("never replays one tenant's response to another tenant's host: the host params are hashed", async () => {
    const key = randomUUID();
    const acme = await post(
      url,
      '/tenant-charges',
      { host: 'acme.example.com', 'idempotency-key': key },
      { amount: 100 },
    );
    expect(acme.status).toBe(201);
    expect(JSON.parse(acme.body)).toMatchObject({ tenant: 'acme' });
    const evil = await post(
      url,
      '/tenant-charges',
      { host: 'evil.example.com', 'idempotency-key': key },
      { amount: 100 },
    );
    expect(evil.status).toBe(409);
    expect(evil.body).not.toContain('acme');
    expect(JSON.parse(evil.body)).toMatchObject({
      code: 'idempotency_key_reused_with_different_params',
    });
    const again = await post(
      url,
      '/tenant-charges',
      { host: 'acme.example.com', 'idempotency-key': key },
      { amount: 100 },
    );
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(acme.body);
    expect(exec.count('tenant', 'acme')).toBe(1);
    expect(exec.count('tenant', 'evil')).toBe(0);
  });

  it('tells two host patterns with the same params apart by the host name', async () => {
    const key = randomUUID();
    const a = await post(url, '/multi-host', { host: 'x.a.example', 'idempotency-key': key }, {});
    expect(a.status).toBe(201);
    const b = await post(url, '/multi-host', { host: 'x.b.example', 'idempotency-key': key }, {});
    expect(b.status).toBe(409);
    expect(b.body).not.toContain('x.a.example');
    // The host name as Nest matches it: case does not make another request.
    const upper = await post(
      url,
      '/multi-host',
      { host: 'X.A.example', 'idempotency-key': key },
      {},
    );
    expect(upper.headers['idempotent-replayed']).toBe('true');
    expect(upper.body).toBe(a.body);
    expect(exec.count('multi', 'x.a.example')).toBe(1);
    expect(exec.count('multi', 'x.b.example')).toBe(0);
  });

  it('completes the key of a handler answered 304 (@HttpCode(304)): it never runs twice', async () => {
    const key = randomUUID();
    const first = await post(url, '/not-modified', { 'idempotency-key': key }, undefined, 'GET');
    expect(first.status).toBe(304);
    const again = await post(url, '/not-modified', { 'idempotency-key': key }, undefined, 'GET');
    expect(again.status).toBe(409);
    expect(JSON.parse(again.body)).toMatchObject({
      code: 'idempotency_response_not_replayable',
      original_status: 304,
    });
    expect(exec.count('304')).toBe(1);
  });

  it('never answers a version 2 request with version 1 of the same path: the version is hashed', async () => {
    const key = randomUUID();
    const v1 = await post(
      url,
      '/versioned',
      { 'x-api-version': '1', 'idempotency-key': key },
      { amount: 7 },
    );
    expect(v1.status).toBe(201);
    expect(JSON.parse(v1.body)).toMatchObject({ version: 1 });
    const v2 = await post(
      url,
      '/versioned',
      { 'x-api-version': '2', 'idempotency-key': key },
      { amount: 7 },
    );
    expect(v2.status).toBe(409);
    expect(v2.body).not.toContain('"version":1');
    const v2Fresh = await post(
      url,
      '/versioned',
      { 'x-api-version': '2', 'idempotency-key': randomUUID() },
      { amount: 7 },
    );
    expect(JSON.parse(v2Fresh.body)).toMatchObject({ version: 2 });
    expect(exec.count('v1')).toBe(1);
    expect(exec.count('v2')).toBe(1);
  });

  it('stores a route pattern longer than the endpoint column, so its keys work instead of a 503', async () => {
    const key = randomUUID();
    const first = await post(url, `/${LONG_PATH}`, { 'idempotency-key': key }, {});
    expect(first.status).toBe(201);
    const again = await post(url, `/${LONG_PATH}`, { 'idempotency-key': key }, {});
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
    expect(exec.count('long')).toBe(1);
    const [row] = await db.records('idempotency_key = $1', [key]);
    expect(row.endpoint).toHaveLength(255);
    expect(row.endpoint).toMatch(
      /^POST \/billing\/customer-subscription-invoices.* #[0-9a-f]{64}$/,
    );
  });

  it("keeps the controller's options where the method gives a field as undefined", async () => {
    const missing = await post(url, '/refunds', {}, {});
    expect(missing.status).toBe(400);
    expect(JSON.parse(missing.body)).toMatchObject({ code: 'idempotency_key_missing' });
    const key = randomUUID();
    expect((await post(url, '/refunds', { 'idempotency-key': key }, {})).status).toBe(201);
    const [row] = await db.records('idempotency_key = $1', [key]);
    const seconds = (row.expires_at.getTime() - row.created_at.getTime()) / 1000;
    expect(Math.round(seconds)).toBe(3600);
    expect(exec.count('refund')).toBe(1);
  });
});
