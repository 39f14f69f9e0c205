import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';

/**
 * attack-82. `@Idempotent()` on a controller CLASS (docs/options.md: "`@Idempotent(options?)` on a
 * method or a controller class"), in a process that closes its app and builds another from the
 * same classes: what every Nest e2e suite does (`beforeEach` creates the app, `afterEach` closes
 * it), and a worker that rebuilds its app. The first app's interceptor instance was written into
 * the handler's metadata at start-up and stayed there, so the second app's keyed requests went to
 * the first app's store: with its pool ended ("the app ends it"), every keyed request answered
 * `503 idempotency_store_unavailable` although PostgreSQL was up, and the handler never ran. A
 * method-level `@Idempotent()` in the same setup works (the Nest-resolved interceptor class).
 */
/** Fresh classes per platform, so each platform's run starts clean. */
function controllers() {
  @Controller('payments')
  @Idempotent()
  class ClassLevelPayments {
    runs = 0;
    @Post()
    charge(@Body() dto: { amount: number }) {
      this.runs++;
      return { id: `pay_${randomUUID()}`, status: 'succeeded', ...dto };
    }
  }

  @Controller('refunds')
  class MethodLevelRefunds {
    @Post()
    @Idempotent()
    refund(@Body() dto: { amount: number }) {
      return { id: `re_${randomUUID()}`, ...dto };
    }
  }
  return [ClassLevelPayments, MethodLevelRefunds];
}

describe.each(['express', 'fastify'] as const)(
  'a second app of the same classes after app.close() (%s)',
  (platform) => {
    let db: MigratedDatabase;
    const classes = controllers();
    beforeAll(async () => {
      db = await createMigratedDatabase('attack82_next_app');
    });
    afterAll(async () => db?.drop());

    /** The plain-pg setup of the README, one pool per app, ended after app.close(). */
    async function startApp() {
      const pool = new pg.Pool({ connectionString: db.url, max: 4 });
      @Module({
        imports: [IdempotencyModule.forRoot({ pool, cleanup: { enabled: false } })],
        controllers: classes,
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

    it('runs and replays keyed requests in the second app as in the first', async () => {
      const key = randomUUID();
      const first = await startApp();
      const charged = await send(first.url, '/payments', { key, body: { amount: 500 } });
      expect(charged.status).toBe(201);
      await first.stop();

      const second = await startApp();
      try {
        // The method-level route works in the second app.
        const refund = await send(second.url, '/refunds', {
          key: randomUUID(),
          body: { amount: 1 },
        });
        expect(refund.status).toBe(201);

        // A retry of the first app's charge: the record is in PostgreSQL, so it replays.
        const retry = await send(second.url, '/payments', { key, body: { amount: 500 } });
        expect({
          status: retry.status,
          code: retry.status === 201 ? undefined : retry.json().code,
        }).toEqual({ status: 201, code: undefined });
        expect(retry.headers['idempotent-replayed']).toBe('true');
        expect(retry.text).toBe(charged.text);

        // A new charge runs in the second app.
        const fresh = await send(second.url, '/payments', {
          key: randomUUID(),
          body: { amount: 700 },
        });
        expect(fresh.status).toBe(201);
      } finally {
        await second.stop();
      }
    });
  },
);
