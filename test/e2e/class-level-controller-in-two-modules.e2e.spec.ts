import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { RouterModule } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { legacyKeyModule } from '../fixtures/legacy-key-module.js';

/**
 * attack-83. One controller class with a class-level @Idempotent(), declared in two feature
 * modules mounted under two prefixes (RouterModule), each module with its own forRoot()
 * (isGlobal: false; the legacy one reads 'X-Legacy-Key'). Nest builds one controller per module;
 * the route method (one function) gets one placement, the module scanned last: the other
 * module's routes run with the wrong forRoot()'s interceptor, and a retry under its own header
 * runs the handler again.
 */
function controllers() {
  let runs = 0;
  @Controller('charges')
  @Idempotent()
  class Charges {
    @Post()
    charge(@Body() dto: { amount: number }) {
      runs++;
      return { id: `pay_${randomUUID()}`, ...dto };
    }
  }
  return { Charges, runs: () => runs };
}

describe.each(['express', 'fastify'] as const)(
  'class-level @Idempotent() controller in two modules with their own forRoot() (%s)',
  (platform) => {
    let db: MigratedDatabase;
    let pool: pg.Pool;
    let app: ListeningApp;
    const c = controllers();
    beforeAll(async () => {
      db = await createMigratedDatabase('attack83_two_modules');
      pool = new pg.Pool({ connectionString: db.url, max: 6 });
      const LegacyModule = legacyKeyModule(pool, [c.Charges]);
      @Module({
        imports: [
          IdempotencyModule.forRoot({ pool, isGlobal: false, cleanup: { enabled: false } }),
        ],
        controllers: [c.Charges],
      })
      class CurrentModule {}
      @Module({
        imports: [
          LegacyModule,
          CurrentModule,
          RouterModule.register([
            { path: 'legacy', module: LegacyModule },
            { path: 'v2', module: CurrentModule },
          ]),
        ],
      })
      class AppModule {}
      app = await listenApp(AppModule, platform);
    });
    afterAll(async () => {
      await app?.close();
      await pool?.end();
      await db?.drop();
    });

    const retried = async (path: string, header: string) => {
      const key = randomUUID();
      const before = c.runs();
      const first = await send(app.url, path, { headers: [[header, key]], body: { amount: 5 } });
      const retry = await send(app.url, path, { headers: [[header, key]], body: { amount: 5 } });
      return {
        first: first.status,
        replayed: retry.headers['idempotent-replayed'],
        runs: c.runs() - before,
      };
    };

    it('legacy prefix: a retry with the same X-Legacy-Key replays', async () => {
      expect(await retried('/legacy/charges', 'X-Legacy-Key')).toEqual({
        first: 201,
        replayed: 'true',
        runs: 1,
      });
    });

    it('v2 prefix: a retry with the same Idempotency-Key replays', async () => {
      expect(await retried('/v2/charges', 'Idempotency-Key')).toEqual({
        first: 201,
        replayed: 'true',
        runs: 1,
      });
    });
  },
);
