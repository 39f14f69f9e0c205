/**
 * A `@Redirect()` route under `@Idempotent()`: its replay is the stored 303 with the first
 * answer's Location, and nothing is logged for it. After the replay Nest still applies the
 * route's redirect to the `undefined` the route returned (`res.redirect()` on Express, which set
 * Location on the ended response and logged ERR_HTTP_HEADERS_SENT per replay through Nest's
 * ExceptionsHandler; `reply.status().redirect()` on Fastify, whose own logger is watched here too).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, type INestApplication, Module, Post, Redirect } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { LogCapture } from '../fixtures/log-capture.js';

let runs = 0;
@Controller('checkout')
class CheckoutController {
  @Post()
  @Idempotent()
  @Redirect('https://pay.example.com/', 303)
  start(@Body() _body: unknown) {
    runs++;
    return { url: `https://pay.example.com/sessions/${randomUUID()}` };
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`@Redirect() route replay (${platform})`, () => {
    let db: MigratedDatabase;
    let app: INestApplication;
    let url: string;
    const logs = new LogCapture();
    /** Fastify's own log lines at warn or above (pino levels: 40 warn, 50 error). */
    const fastifyLogs: string[] = [];
    beforeAll(async () => {
      db = await createMigratedDatabase('redirect_replay');
      @Module({
        imports: [
          IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
        ],
        controllers: [CheckoutController],
      })
      class AppModule {}
      const stream = new Writable({
        write(chunk: Buffer, _encoding, done) {
          const line = chunk.toString();
          if ((JSON.parse(line) as { level: number }).level >= 40) fastifyLogs.push(line);
          done();
        },
      });
      const adapter =
        platform === 'fastify'
          ? new FastifyAdapter({ logger: { level: 'warn', stream } })
          : new ExpressAdapter();
      app = await NestFactory.create(AppModule, adapter as never, { logger: logs });
      await app.listen(0, '127.0.0.1');
      url = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
    });
    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    it('replays the 303 and its Location without an error logged', async () => {
      const key = randomUUID();
      const before = runs;
      const first = await send(url, '/checkout', { key, body: { cart: 1 } });
      const errorsBefore = logs.lines.filter((l) => l.level === 'error').length;
      const retry = await send(url, '/checkout', { key, body: { cart: 1 } });
      await new Promise((r) => setTimeout(r, 200));
      expect(runs - before).toBe(1);
      expect(first.status).toBe(303);
      expect(retry.status).toBe(303);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.headers.location).toBe(first.headers.location);
      expect(retry.text).toBe(first.text);
      const errors = logs.lines.filter((l) => l.level === 'error').slice(errorsBefore);
      expect(errors.map((e) => e.message)).toEqual([]);
      expect(fastifyLogs).toEqual([]);
    });
  });
}
