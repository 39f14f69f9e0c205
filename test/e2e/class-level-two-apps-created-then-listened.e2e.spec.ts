import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';

/**
 * attack-83. Two apps from the same classes, each with its own database (two tenants), CREATED
 * first and then initialized (NestFactory.create() builds the providers, so the interceptor
 * order runs there; listen()/init() maps the routes and reads the interceptor metadata then).
 * The metadata of the shared route method holds the placement of the app CREATED last, so the
 * first app's static routes are mapped with the second app's placement: its keyed requests are
 * recorded in the other tenant's database.
 */
function controllers() {
  @Controller('payments')
  @Idempotent()
  class Payments {
    @Post()
    charge(@Body() dto: { amount: number }) {
      return { id: `pay_${randomUUID()}`, ...dto };
    }
  }
  return [Payments];
}

describe.each(['express', 'fastify'] as const)(
  'class-level @Idempotent(), two apps created before either listens (%s)',
  (platform) => {
    let dbA: MigratedDatabase;
    let dbB: MigratedDatabase;
    const classes = controllers();
    beforeAll(async () => {
      dbA = await createMigratedDatabase('attack83_created_a');
      dbB = await createMigratedDatabase('attack83_created_b');
    });
    afterAll(async () => {
      await dbA?.drop();
      await dbB?.drop();
    });

    async function createApp(db: MigratedDatabase) {
      const pool = new pg.Pool({ connectionString: db.url, max: 4 });
      @Module({
        imports: [IdempotencyModule.forRoot({ pool, cleanup: { enabled: false } })],
        controllers: classes,
      })
      class AppModule {}
      const adapter = platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter();
      const app = await NestFactory.create(AppModule, adapter as never, { logger: false });
      return {
        app,
        listen: async () => {
          await app.listen(0, '127.0.0.1');
          return `http://127.0.0.1:${app.getHttpServer().address().port}`;
        },
        stop: async () => {
          await app.close();
          await pool.end();
        },
      };
    }

    it('each app records its keyed requests in its own database', async () => {
      const a = await createApp(dbA);
      const b = await createApp(dbB);
      try {
        const urlA = await a.listen();
        const urlB = await b.listen();
        const keyA = randomUUID();
        const keyB = randomUUID();
        expect((await send(urlA, '/payments', { key: keyA, body: { amount: 1 } })).status).toBe(
          201,
        );
        expect((await send(urlB, '/payments', { key: keyB, body: { amount: 2 } })).status).toBe(
          201,
        );
        const where = 'idempotency_key = $1';
        expect({
          aInA: (await dbA.records(where, [keyA])).length,
          aInB: (await dbB.records(where, [keyA])).length,
          bInB: (await dbB.records(where, [keyB])).length,
          bInA: (await dbA.records(where, [keyB])).length,
        }).toEqual({ aInA: 1, aInB: 0, bInB: 1, bInA: 0 });
      } finally {
        await a.stop();
        await b.stop();
      }
    });
  },
);
