import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { legacyKeyModule } from '../fixtures/legacy-key-module.js';

/**
 * attack-83. Same setup as class-level-module-instance (a legacy module with its own forRoot(),
 * isGlobal: false, headerName 'X-Legacy-Key'), but both controllers inherit their route method
 * from one base class (a generic CRUD base controller). The route method is ONE function object
 * shared by both classes, so its INTERCEPTORS_METADATA holds one placement: the last module
 * scanned wins, and the other module's controller is served by the wrong forRoot()'s
 * interceptor: it looks for the other header, finds none, and runs the retry again.
 */
function controllers() {
  const runs: Record<string, number> = {};
  abstract class ChargesBase {
    @Post()
    charge(@Body() dto: { amount: number }) {
      const name = this.constructor.name;
      runs[name] = (runs[name] ?? 0) + 1;
      return { id: `pay_${randomUUID()}`, ...dto };
    }
  }
  @Controller('legacy/charges')
  @Idempotent()
  class LegacyCharges extends ChargesBase {}
  @Controller('charges')
  @Idempotent()
  class Charges extends ChargesBase {}
  return { runs, LegacyCharges, Charges };
}

describe.each(['express', 'fastify'] as const)(
  'class-level @Idempotent() on two controllers sharing an inherited route, two forRoot() (%s)',
  (platform) => {
    let db: MigratedDatabase;
    let pool: pg.Pool;
    let app: ListeningApp;
    const c = controllers();
    beforeAll(async () => {
      db = await createMigratedDatabase('attack83_inherited');
      pool = new pg.Pool({ connectionString: db.url, max: 6 });
      const LegacyModule = legacyKeyModule(pool, [c.LegacyCharges]);
      @Module({
        imports: [IdempotencyModule.forRoot({ pool, cleanup: { enabled: false } }), LegacyModule],
        controllers: [c.Charges],
      })
      class AppModule {}
      app = await listenApp(AppModule, platform);
    });
    afterAll(async () => {
      await app?.close();
      await pool?.end();
      await db?.drop();
    });

    const chargeTwice = async (path: string, header: string) => {
      const key = randomUUID();
      const first = await send(app.url, path, { headers: [[header, key]], body: { amount: 5 } });
      const retry = await send(app.url, path, { headers: [[header, key]], body: { amount: 5 } });
      return { first, retry };
    };

    it('legacy module: a retry with the same X-Legacy-Key replays, runs once', async () => {
      const { first, retry } = await chargeTwice('/legacy/charges', 'X-Legacy-Key');
      expect(first.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(c.runs.LegacyCharges).toBe(1);
    });

    it('app module: a retry with the same Idempotency-Key replays, runs once', async () => {
      const { first, retry } = await chargeTwice('/charges', 'Idempotency-Key');
      expect(first.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(c.runs.Charges).toBe(1);
    });
  },
);
