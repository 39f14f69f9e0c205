/**
 * A Fastify app maps charge outcomes to HTTP statuses in an onSend hook that runs after the
 * library's (a declined payload goes out as 402). When the client's timeout fired while the card
 * was charged, the 402 is still what is stored and replayed: only Fastify's own answer to a
 * failed send (its onSend hooks run a second time) is not the outcome. 9092b8d first took any
 * other status for a failed send, and the retry of a declined charge heard it succeeded (found by
 * helper-71).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import fp from 'fastify-plugin';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { sendAndGiveUp } from '../fixtures/client-gone.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const charges = new Map<string, number>();

@Controller('charges')
class ChargesController {
  @Post(['', 'slow'])
  @Idempotent()
  async charge(@Body() body: { ref: string; decline?: boolean }) {
    charges.set(body.ref, (charges.get(body.ref) ?? 0) + 1);
    await sleep(300);
    return {
      id: `pay_${body.ref}`,
      ref: body.ref,
      status: body.decline ? 'declined' : 'succeeded',
    };
  }
}

/** The app's status mapping: a declined charge is a 402. */
/** Added per route, the way @fastify/compress adds its hook (so routes can opt out in config). */
const outcomeStatus = fp(async (fastify: any) => {
  const hook = async (req: any, reply: any, payload: unknown) => {
    // The async variant looks the decline reason up first (a few ms of I/O).
    if (req.url.includes('slow')) await sleep(20);
    if (typeof payload === 'string' && payload.includes('"status":"declined"')) reply.code(402);
    return payload;
  };
  fastify.addHook('onRoute', (route: any) => {
    const own = route.onSend ? [].concat(route.onSend) : [];
    route.onSend = [...own, hook];
  });
});

describe('Fastify onSend status mapping, client gone', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('onsend');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [ChargesController],
    })
    class AppModule {}
    ({ url, close } = await listenApp(AppModule, 'fastify', async (app) =>
      (app as NestFastifyApplication).register(outcomeStatus as never),
    ));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  for (const path of ['/charges', '/charges/slow']) {
    it(`${path}: control: client stays, declined → 402 stored and replayed`, async () => {
      const key = randomUUID();
      const ref = `stay-${randomUUID()}`;
      const first = await send(url, path, { key, body: { ref, decline: true } });
      const retry = await send(url, path, { key, body: { ref, decline: true } });
      expect([first.status, retry.status, charges.get(ref)]).toEqual([402, 402, 1]);
      expect(retry.text).toBe(first.text);
    });
  }

  for (const path of ['/charges', '/charges/slow']) {
    it(`${path}: client gone, declined: the retry hears 402, never 201`, async () => {
      const key = randomUUID();
      const ref = `gone-${randomUUID()}`;
      await sendAndGiveUp(url, path, key, { ref, decline: true }, 100);
      await sleep(800);
      const retry = await send(url, path, { key, body: { ref, decline: true } });
      expect({ charges: charges.get(ref), status: retry.status }).toEqual({
        charges: 1,
        status: 402,
      });
    });
  }
});
