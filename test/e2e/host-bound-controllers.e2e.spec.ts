import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, type INestApplication, Module, Post, Req } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { postWithHost as post } from '../fixtures/host-request.js';
import { Executions, type Platform } from '../fixtures/payments.fixture.js';

const exec = new Executions();

// Host-based routing as in the Nest docs: two controllers on fixed hosts, same path.
@Controller({ host: 'admin.example.com', path: 'transfers' })
class AdminTransfers {
  @Post()
  @Idempotent()
  create(@Body() body: { amount: number }) {
    return { handler: 'admin-refund-all', amount: body.amount, run: exec.hit('admin') };
  }
}

@Controller({ host: 'api.example.com', path: 'transfers' })
class ApiTransfers {
  @Post()
  @Idempotent()
  create(@Body() body: { amount: number }) {
    return { handler: 'api-transfer', amount: body.amount, run: exec.hit('api') };
  }
}

// A RegExp host serves every tenant's sub-domain, like ':tenant.example.com'; without named groups
// Nest leaves req.hosts empty.
@Controller({ host: /^([a-z0-9-]+)\.tenants\.example\.com$/, path: 'tenant-transfers' })
class TenantTransfers {
  @Post()
  @Idempotent()
  create(@Req() req: { hostname: string }, @Body() body: { amount: number }) {
    const tenant = req.hostname.split('.')[0];
    return { tenant, secret: `receipt-of-${tenant}`, amount: body.amount, run: exec.hit(tenant) };
  }
}

// Fastify refuses two routes with one method and path, so this routing exists on Express only.
describe.each<Platform>(['express'])('controllers bound to hosts, %s', (platform) => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    db = await createMigratedDatabase(`e12host_${platform}`);
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [AdminTransfers, ApiTransfers, TenantTransfers],
    })
    class HostModule {}
    const adapter = platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter();
    app = await NestFactory.create(HostModule, adapter as never, { logger: false });
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it("never answers api.example.com's handler with admin.example.com's stored response", async () => {
    const key = randomUUID();
    const admin = await post(
      url,
      '/transfers',
      { host: 'admin.example.com', 'idempotency-key': key },
      { amount: 5 },
    );
    expect(admin.status).toBe(201);
    expect(JSON.parse(admin.body)).toMatchObject({ handler: 'admin-refund-all' });
    const api = await post(
      url,
      '/transfers',
      { host: 'api.example.com', 'idempotency-key': key },
      { amount: 5 },
    );
    // Another handler on the same path: the key's reuse is refused, as on another route.
    expect(api.status).toBe(409);
    expect(api.body).not.toContain('admin-refund-all');
    expect([exec.count('admin'), exec.count('api')]).toEqual([1, 0]);
    // Each host's own retry still replays its own response.
    const again = await post(
      url,
      '/transfers',
      { host: 'admin.example.com', 'idempotency-key': key },
      { amount: 5 },
    );
    expect(again).toMatchObject({ status: 201, body: admin.body });
    expect(exec.count('admin')).toBe(1);
  });

  it("never answers one tenant of a RegExp host with another tenant's stored response", async () => {
    const key = randomUUID();
    const path = '/tenant-transfers';
    const acme = await post(
      url,
      path,
      { host: 'acme.tenants.example.com', 'idempotency-key': key },
      { amount: 5 },
    );
    expect(acme.status).toBe(201);
    const evil = await post(
      url,
      path,
      { host: 'evil.tenants.example.com', 'idempotency-key': key },
      { amount: 5 },
    );
    expect(evil.status).toBe(409);
    expect(evil.body).not.toContain('receipt-of-acme');
    expect([exec.count('acme'), exec.count('evil')]).toEqual([1, 0]);
    const again = await post(
      url,
      path,
      { host: 'acme.tenants.example.com', 'idempotency-key': key },
      { amount: 5 },
    );
    expect(again).toMatchObject({ status: 201, body: acme.body });
  });
});
