/**
 * The NestJS docs' compression recipe on Fastify (`@fastify/compress`, defaults) and a JSON
 * charge whose receipt is over the plugin's synchronous threshold (an invoice with line items):
 * the plugin turns the payload into a gzip stream. The client (gzip accepted) times out while
 * the card is charged; the stream then fails on the closed socket, and Fastify answers that
 * with a 500 of its own. Until 2026-12-05 that 500 was recorded as the outcome: the retry got
 * `409 idempotency_response_not_replayable` with `original_status: 500` for a card that was
 * charged (found by helper-70). Now the payload Fastify serialized is stored and replayed.
 * Controls: Express `compression()`, and a receipt compressed in one piece.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fastifyCompress from '@fastify/compress';
import { Body, Controller, Module, Post } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import compression from 'compression';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { sendAndGiveUp } from '../fixtures/client-gone.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const charges = new Map<string, number>();

/** A receipt with its line items: `lines` of them. */
const receipt = (ref: string, lines: number) => ({
  id: `pay_${randomUUID()}`,
  ref,
  status: 'succeeded',
  lines: Array.from({ length: lines }, (_, i) => ({ line: i, text: `item ${i} of order ${ref}` })),
});

@Controller('charges')
class ChargesController {
  /** An invoice-sized receipt (~25 KiB). */
  @Post('invoice')
  @Idempotent()
  async invoice(@Body() body: { ref: string }) {
    charges.set(body.ref, (charges.get(body.ref) ?? 0) + 1);
    await sleep(400); // the card processor
    return receipt(body.ref, 400);
  }

  /** A small receipt (~2 KiB): compressed in one piece. */
  @Post('small')
  @Idempotent()
  async small(@Body() body: { ref: string }) {
    charges.set(body.ref, (charges.get(body.ref) ?? 0) + 1);
    await sleep(400);
    return receipt(body.ref, 40);
  }
}

/** Sends the request (gzip accepted) and resets the connection after `ms`: a client timeout. */

for (const platform of ['fastify', 'express'] as const) {
  describe(`compressed receipt, client gone (${platform})`, () => {
    let db: MigratedDatabase;
    let url: string;
    let close: () => Promise<void>;

    beforeAll(async () => {
      db = await createMigratedDatabase('gzip_gone');
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
      ({ url, close } = await listenApp(AppModule, platform, async (app) => {
        if (platform === 'express') return app.use(compression());
        return (app as NestFastifyApplication).register(fastifyCompress as never);
      }));
    });
    afterAll(async () => {
      await close?.();
      await db?.drop();
    });

    for (const path of ['/charges/invoice', '/charges/small']) {
      it(`${path}: charged once; the retry gets the stored receipt`, async () => {
        const key = randomUUID();
        const ref = randomUUID();
        await sendAndGiveUp(url, path, key, { ref }, 150, {
          'accept-encoding': 'gzip, deflate, br',
        });
        await sleep(800); // the handler has returned
        const [record] = await db.records('idempotency_key = $1', [key]);
        await sleep(3_000); // past maxHoldSeconds + the lease
        const retry = await send(url, path, { key, body: { ref } });
        expect({
          charges: charges.get(ref),
          retry: retry.status,
          replayed: retry.headers['idempotent-replayed'],
        }).toEqual({ charges: 1, retry: 201, replayed: 'true' });
        expect(record?.status).toBe('completed');
      }, 15_000);
    }
  });
}
