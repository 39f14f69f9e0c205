/**
 * Nest's FastifyAdapter parses application/x-www-form-urlencoded with fast-querystring, whose result
 * is `new Empty()` (its prototype a bare `Object.create(null)`). An empty form (curl -X POST -d '',
 * an HTML form with no fields) was refused as a value JSON writes as {} though it holds data.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, type INestApplication, Module, Param, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

let runs = 0;

@Controller()
class CaptureController {
  @Post('payments/:id/capture')
  @Idempotent()
  capture(@Param('id') id: string) {
    runs++;
    return { id, captured: true, run: runs };
  }
}

describe('a keyed empty urlencoded form on Fastify (curl -X POST -d "")', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    db = await createMigratedDatabase('e12form');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [CaptureController],
    })
    class FormModule {}
    app = await NestFactory.create(FormModule, new FastifyAdapter() as never, { logger: false });
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const send = (key: string, body: string) =>
    fetch(`${url}/payments/pi_1/capture`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'idempotency-key': key },
      body,
    }).then(async (r) => ({ status: r.status, body: await r.text() }));

  it('runs an empty form once and replays it', async () => {
    const key = randomUUID();
    const first = await send(key, '');
    const second = await send(key, '');
    expect(first.status).toBe(201);
    expect(second).toEqual(first);
    expect(runs).toBe(1);
  });

  it('control: a non-empty form runs', async () => {
    const r = await send(randomUUID(), 'note=x');
    expect(r.status).toBe(201);
  });
});
