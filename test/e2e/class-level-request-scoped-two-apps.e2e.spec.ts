import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post, Scope } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { NestFactory } from '@nestjs/core';

/**
 * attack-83. Two apps alive at once, built from the same classes, each with its own pool (two
 * tenants, or a test that keeps one app while it builds another). A REQUEST-scoped controller
 * makes Nest read the interceptor metadata at every request, and that metadata (on the shared
 * method) holds the placement of the app started last: the first app's keyed requests go to the
 * second app's module and store. Once the second app is closed (its pool ended), the first app,
 * still up, answers 503 to every keyed request of the class-level route. A static controller
 * keeps its own app's placement (captured when its routes were mapped).
 */
function controllers() {
  let runs = 0;
  @Controller({ path: 'scoped', scope: Scope.REQUEST })
  @Idempotent()
  class ScopedPayments {
    @Post()
    charge(@Body() dto: { amount: number }) {
      runs++;
      return { id: `pay_${randomUUID()}`, ...dto };
    }
  }
  @Controller('static')
  @Idempotent()
  class StaticPayments {
    @Post()
    charge(@Body() dto: { amount: number }) {
      return { id: `pay_${randomUUID()}`, ...dto };
    }
  }
  return { classes: [ScopedPayments, StaticPayments], runs: () => runs };
}

describe.each(['express', 'fastify'] as const)(
  'class-level @Idempotent() on a request-scoped controller, two apps alive (%s)',
  (platform) => {
    let dbA: MigratedDatabase;
    let dbB: MigratedDatabase;
    let c = controllers();
    beforeAll(async () => {
      dbA = await createMigratedDatabase('attack83_scoped_a');
      dbB = await createMigratedDatabase('attack83_scoped_b');
    });
    afterAll(async () => {
      await dbA?.drop();
      await dbB?.drop();
    });

    async function startApp(db: MigratedDatabase) {
      const pool = new pg.Pool({ connectionString: db.url, max: 4 });
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            pool,
            cleanup: { enabled: false },
            getUserId: (req: any) => req.headers['x-user-id'],
          }),
        ],
        controllers: c.classes,
      })
      class AppModule {}
      const app = await listenApp(AppModule, platform);
      return {
        ...app,
        stop: async () => {
          await app.close();
          await pool.end();
        },
      };
    }

    it('the first app keeps serving keyed requests from its own store', async () => {
      c = controllers(); // fresh classes per test
      const a = await startApp(dbA);
      try {
        const b = await startApp(dbB);
        await b.stop();
        const stat = await send(a.url, '/static', { key: randomUUID(), body: { amount: 1 } });
        expect(stat.status).toBe(201); // holds
        const key = randomUUID();
        const first = await send(a.url, '/scoped', { key, body: { amount: 1 } });
        expect({
          status: first.status,
          body: first.status === 201 ? undefined : first.text,
        }).toEqual({
          status: 201,
          body: undefined,
        });
        const retry = await send(a.url, '/scoped', { key, body: { amount: 1 } });
        expect(retry.headers['idempotent-replayed']).toBe('true');
      } finally {
        await a.stop();
      }
    });

    it("tenant A's response is never replayed to tenant B (both apps up)", async () => {
      c = controllers(); // fresh classes per test
      const a = await startApp(dbA);
      const b = await startApp(dbB);
      try {
        const key = randomUUID();
        const atA = await send(a.url, '/scoped', { key, user: 'u1', body: { amount: 1 } });
        expect(atA.status).toBe(201);
        const atB = await send(b.url, '/scoped', { key, user: 'u1', body: { amount: 1 } });
        expect(atB.status).toBe(201);
        expect(atB.headers['idempotent-replayed']).toBeUndefined();
        expect(atB.text).not.toBe(atA.text);
      } finally {
        await b.stop();
        await a.stop();
      }
    });

    it('a standalone context of the same module, opened and closed beside the app, leaves it alone', async () => {
      c = controllers(); // fresh classes per test
      const a = await startApp(dbA);
      try {
        // e.g. a job runner: NestFactory.createApplicationContext(AppModule) with its own pool
        const pool = new pg.Pool({ connectionString: dbB.url, max: 2 });
        @Module({
          imports: [IdempotencyModule.forRoot({ pool, cleanup: { enabled: false } })],
          controllers: c.classes,
        })
        class JobModule {}
        const ctx = await NestFactory.createApplicationContext(JobModule, { logger: false });
        await ctx.close();
        await pool.end();
        const res = await send(a.url, '/scoped', { key: randomUUID(), body: { amount: 1 } });
        expect({ status: res.status, body: res.status === 201 ? undefined : res.text }).toEqual({
          status: 201,
          body: undefined,
        });
      } finally {
        await a.stop();
      }
    });
  },
);
