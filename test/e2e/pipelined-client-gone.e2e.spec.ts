/**
 * HTTP/1.1 pipelining: a client sends two charges on one connection (each its own key), then its
 * timeout fires and it closes the connection while both run. Each handler returns a body Nest
 * streams (a web Response), which Nest does not start for a closed socket. The second request's
 * response, queued behind the first, has no socket of its own and is never destroyed: the caller
 * counts as gone when its connection is (helper-75). Both keys are concluded.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';

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

function request(path: string, key: string, body: unknown): Buffer {
  const payload = JSON.stringify(body);
  return Buffer.from(
    `POST ${path} HTTP/1.1\r\nHost: localhost\r\nIdempotency-Key: ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
  );
}

/** Two pipelined requests on one connection, reset after `ms`. */
function pipelineAndGiveUp(port: number, reqs: Buffer[], ms: number): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.on('close', () => resolve());
    socket.write(Buffer.concat(reqs));
    setTimeout(() => socket.destroy(), ms);
  });
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`pipelined charges, client gone (${platform})`, () => {
    let db: MigratedDatabase;
    let url: string;
    let close: () => Promise<void>;
    beforeAll(async () => {
      db = await createMigratedDatabase('atk75_pipe');
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
      ({ url, close } = await listenApp(AppModule, platform));
    });
    afterAll(async () => {
      await close?.();
      await db?.drop();
    });

    it('each charge runs once; both keys are concluded, never free for a second run', async () => {
      const port = Number(new URL(url).port);
      const [k1, k2] = [randomUUID(), randomUUID()];
      const [r1, r2] = [randomUUID(), randomUUID()];
      await pipelineAndGiveUp(
        port,
        [request('/charges/web', k1, { ref: r1 }), request('/charges/web', k2, { ref: r2 })],
        150,
      );
      await sleep(3_800);
      const retry1 = await send(url, '/charges/web', { key: k1, body: { ref: r1 } });
      const retry2 = await send(url, '/charges/web', { key: k2, body: { ref: r2 } });
      expect({ first: charges.get(r1), retry1: retry1.status }).toEqual({ first: 1, retry1: 409 });
      expect({ second: charges.get(r2), retry2: retry2.status }).toEqual({
        second: 1,
        retry2: 409,
      });
    }, 15_000);
  });
}
