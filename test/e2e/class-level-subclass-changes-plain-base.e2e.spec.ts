import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { legacyKeyModule } from '../fixtures/legacy-key-module.js';

/**
 * attack-84 on 70a12e3. A plain controller WITHOUT @Idempotent() (a generic CRUD controller) is
 * extended by a controller with a class-level @Idempotent(). The class decorator wrote
 * MethodIdempotencyInterceptor into the INTERCEPTORS_METADATA of the inherited route method,
 * which is the base class's own function: the base controller (and any sibling subclass without
 * @Idempotent) carried the idempotency interceptor too. In a module that does not see an
 * IdempotencyModule (here: the app module; the idempotent subclass lives in a feature module
 * with its own forRoot({ isGlobal: false })), Nest could not resolve it and the app did not
 * start, though that route has no @Idempotent and should be untouched.
 */
function controllers() {
  const runs: Record<string, number> = {};
  @Controller('notes')
  class NotesController {
    @Post()
    create(@Body() dto: { text: string }) {
      const name = this.constructor.name;
      runs[name] = (runs[name] ?? 0) + 1;
      return { id: randomUUID(), ...dto };
    }
  }
  @Controller('archived-notes')
  class ArchivedNotesController extends NotesController {}
  @Controller('legacy/notes')
  @Idempotent()
  class LegacyNotesController extends NotesController {}
  return { runs, NotesController, ArchivedNotesController, LegacyNotesController };
}

describe.each(['express', 'fastify'] as const)(
  'a class-level @Idempotent() subclass leaves its plain base controller alone (%s)',
  (platform) => {
    let db: MigratedDatabase;
    let pool: pg.Pool;
    let app: { url: string; close: () => Promise<void> } | undefined;
    let startError: unknown;
    const c = controllers();
    beforeAll(async () => {
      db = await createMigratedDatabase('attack84_plain_base');
      pool = new pg.Pool({ connectionString: db.url, max: 4 });
      const LegacyModule = legacyKeyModule(pool, [c.LegacyNotesController]);
      @Module({
        imports: [LegacyModule],
        controllers: [c.NotesController, c.ArchivedNotesController],
      })
      class AppModule {}
      try {
        // abortOnError: false, so a failed start-up is reported instead of exiting the process.
        const adapter = platform === 'fastify' ? new FastifyAdapter() : new ExpressAdapter();
        const nest = await NestFactory.create(AppModule, adapter as never, {
          logger: false,
          abortOnError: false,
        });
        await nest.listen(0, '127.0.0.1');
        app = {
          url: `http://127.0.0.1:${nest.getHttpServer().address().port}`,
          close: () => nest.close(),
        };
      } catch (e) {
        startError = e;
      }
    });
    afterAll(async () => {
      await app?.close();
      await pool?.end();
      await db?.drop();
    });

    it('the app starts', () => {
      expect(String(startError ?? '')).toBe('');
      expect(app).toBeDefined();
    });

    it.each([
      ['/notes', 'NotesController'],
      ['/archived-notes', 'ArchivedNotesController'],
    ])('%s (no @Idempotent) runs every request', async (path, name) => {
      const key = randomUUID();
      const before = c.runs[name] ?? 0;
      for (let i = 0; i < 2; i++) {
        const res = await send(app!.url, path, {
          headers: [['Idempotency-Key', key]],
          body: { text: 'x' },
        });
        expect(res.status).toBe(201);
        expect(res.headers['idempotent-replayed']).toBeUndefined();
      }
      expect(c.runs[name]).toBe(before + 2);
    });

    it('/legacy/notes (class-level @Idempotent) replays a retry', async () => {
      const key = randomUUID();
      const first = await send(app!.url, '/legacy/notes', {
        headers: [['X-Legacy-Key', key]],
        body: { text: 'x' },
      });
      const retry = await send(app!.url, '/legacy/notes', {
        headers: [['X-Legacy-Key', key]],
        body: { text: 'x' },
      });
      expect(first.status).toBe(201);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(c.runs.LegacyNotesController).toBe(1);
    });
  },
);
