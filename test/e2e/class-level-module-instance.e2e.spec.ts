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
 * attack-82. Two `forRoot()` instances in one app (docs/options.md: "each forRoot() call builds
 * another instance of the module"; with `isGlobal: false` "its providers (the interceptor, the
 * store, ...) are visible only in the module that imports it"): a legacy module imports its own,
 * with the header its old clients send (`headerName: 'X-Legacy-Key'`). A method-level
 * `@Idempotent()` in that module uses that instance; a class-level `@Idempotent()` there was given
 * the OTHER instance's interceptor at start-up, which looked for `Idempotency-Key`, found none, and
 * ran the handler unprotected: the same key charged twice (fixed by `classPlacement`).
 */
function controllers() {
  const charges = { method: 0, cls: 0 };
  @Controller('legacy/method')
  class LegacyMethodLevel {
    @Post()
    @Idempotent()
    charge(@Body() dto: { amount: number }) {
      charges.method++;
      return { id: `pay_${randomUUID()}`, ...dto };
    }
  }
  @Controller('legacy/class')
  @Idempotent()
  class LegacyClassLevel {
    @Post()
    charge(@Body() dto: { amount: number }) {
      charges.cls++;
      return { id: `pay_${randomUUID()}`, ...dto };
    }
  }
  @Controller('payments')
  @Idempotent()
  class Payments {
    @Post()
    charge(@Body() dto: { amount: number }) {
      return { id: `pay_${randomUUID()}`, ...dto };
    }
  }
  return { charges, LegacyMethodLevel, LegacyClassLevel, Payments };
}

describe.each(['express', 'fastify'] as const)(
  'a class-level @Idempotent() in a module with its own forRoot() (%s)',
  (platform) => {
    let db: MigratedDatabase;
    let pool: pg.Pool;
    let app: ListeningApp;
    const c = controllers();
    beforeAll(async () => {
      db = await createMigratedDatabase('attack82_module_instance');
      pool = new pg.Pool({ connectionString: db.url, max: 6 });
      const LegacyModule = legacyKeyModule(pool, [c.LegacyMethodLevel, c.LegacyClassLevel]);
      @Module({
        imports: [IdempotencyModule.forRoot({ pool, cleanup: { enabled: false } }), LegacyModule],
        controllers: [c.Payments],
      })
      class AppModule {}
      app = await listenApp(AppModule, platform);
    });
    afterAll(async () => {
      await app?.close();
      await pool?.end();
      await db?.drop();
    });

    const chargeTwice = async (path: string) => {
      const key = randomUUID();
      const first = await send(app.url, path, {
        headers: [['X-Legacy-Key', key]],
        body: { amount: 500 },
      });
      const retry = await send(app.url, path, {
        headers: [['X-Legacy-Key', key]],
        body: { amount: 500 },
      });
      return { first, retry };
    };

    it('method-level: the retry replays (this holds)', async () => {
      const { first, retry } = await chargeTwice('/legacy/method');
      expect(first.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(c.charges.method).toBe(1);
    });

    it('class-level: the retry with the same X-Legacy-Key replays, the charge runs once', async () => {
      const { first, retry } = await chargeTwice('/legacy/class');
      expect(first.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.text).toBe(first.text);
      expect(c.charges.cls).toBe(1);
    });
  },
);
