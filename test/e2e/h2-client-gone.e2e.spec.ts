/**
 * Fastify with `http2: true`: the client leaves while a slow charge runs, by closing its
 * connection or only its stream (RST_STREAM, what an HTTP/2 client's request timeout does), and
 * the handler then returns a body Nest streams (a web Response), which Nest does not start for a
 * caller that left. As over HTTP/1.1 the run is concluded, never left to lapse: an HTTP/2
 * compatibility response has no `destroyed` of its own, its stream has (helpers 74 and 75).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, type INestApplication, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import { connect } from 'node:http2';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const charges = new Map<string, number>();

@Controller('charges')
class ChargesController {
  @Post('web')
  @Idempotent()
  async web(@Body() body: { ref: string }) {
    charges.set(body.ref, (charges.get(body.ref) ?? 0) + 1);
    await sleep(400);
    return new Response(JSON.stringify({ id: `pay_${randomUUID()}`, ref: body.ref }), {
      status: 201,
      headers: { 'content-type': 'application/json' },
    });
  }
}

/** One POST over a fresh HTTP/2 connection; `giveUpAfterMs` closes the connection before the answer. */
function h2Post(
  origin: string,
  path: string,
  key: string,
  body: unknown,
  giveUpAfterMs?: number,
  how: 'connection' | 'stream' = 'connection',
) {
  return new Promise<{ status: number; text: string }>((resolve) => {
    const session = connect(origin);
    session.on('error', () => undefined);
    const payload = Buffer.from(JSON.stringify(body));
    const stream = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/json',
      'content-length': String(payload.length),
      'idempotency-key': key,
    });
    let status = 0;
    const chunks: Buffer[] = [];
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('error', () => undefined);
    stream.on('close', () => {
      session.close();
      resolve({ status, text: Buffer.concat(chunks).toString() });
    });
    stream.end(payload);
    // A client timeout: the whole connection, or only this stream (RST_STREAM CANCEL).
    if (giveUpAfterMs !== undefined)
      setTimeout(() => (how === 'connection' ? session.destroy() : stream.close(8)), giveUpAfterMs);
  });
}

describe('HTTP/2 (Fastify): the client leaves, the handler then returns a web Response', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let origin: string;
  beforeAll(async () => {
    db = await createMigratedDatabase('atk75_h2gone');
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          leaseSeconds: 1,
          maxHoldSeconds: 2,
        }),
      ],
      controllers: [ChargesController],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, new FastifyAdapter({ http2: true }) as never, {
      logger: false,
    });
    await app.listen(0, '127.0.0.1');
    origin = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each(['connection', 'stream'] as const)(
    'client closes its %s: charges once; the key is concluded, never free for a second run',
    async (how) => {
      const key = randomUUID();
      const ref = randomUUID();
      await h2Post(origin, '/charges/web', key, { ref }, 150, how);
      // Past maxHoldSeconds + the lease (as test/e2e/http-client-gone.e2e.spec.ts waits).
      await sleep(3_800);
      const [record] = await db.records('idempotency_key = $1', [key]);
      const retry = await h2Post(origin, '/charges/web', key, { ref });
      expect({ charges: charges.get(ref), retry: retry.status, record: record?.status }).toEqual({
        charges: 1,
        retry: 409,
        record: 'completed',
      });
    },
    15_000,
  );
});
