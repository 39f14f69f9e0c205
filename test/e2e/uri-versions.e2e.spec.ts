import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  Controller,
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
import { Executions, type Platform } from '../fixtures/payments.fixture.js';

const exec = new Executions();

// Under URI versioning /v1/charges and /v2/charges are two endpoints; an app that wants one scope
// for both names it (docs/behaviour-and-states.md, Fingerprint).
@Controller('charges')
class ChargesController {
  @Post()
  @Version(['1', '2'])
  @Idempotent({ endpoint: 'POST /charges' })
  charge(@Body() body: { amount: number }) {
    return { amount: body.amount, run: exec.hit('charge') };
  }
}

describe.each<Platform>(['express', 'fastify'])(
  'URI versioning, one handler for v1 and v2, %s',
  (platform) => {
    let db: MigratedDatabase;
    let app: INestApplication;
    let url: string;

    beforeAll(async () => {
      db = await createMigratedDatabase(`e12uri_${platform}`);
      @Module({
        imports: [
          IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
        ],
        controllers: [ChargesController],
      })
      class UriModule {}
      const adapter = platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter();
      app = await NestFactory.create(UriModule, adapter as never, { logger: false });
      app.enableVersioning({ type: VersioningType.URI });
      await app.listen(0, '127.0.0.1');
      url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
    });
    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    it('with an endpoint name, a retry under the other version is refused, never run again', async () => {
      const key = randomUUID();
      const send = (v: string) =>
        fetch(`${url}/v${v}/charges`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({ amount: 500 }),
        });
      const before = exec.count('charge');
      const first = await send('1');
      expect(first.status).toBe(201);
      const retry = await send('2');
      expect(retry.status).toBe(409);
      expect(await retry.json()).toMatchObject({
        code: 'idempotency_key_reused_with_different_params',
      });
      expect(exec.count('charge') - before).toBe(1);
      const same = await send('1');
      expect(same.headers.get('idempotent-replayed')).toBe('true');
      expect(exec.count('charge') - before).toBe(1);
    });
  },
);
