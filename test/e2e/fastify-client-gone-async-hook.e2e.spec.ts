/**
 * A Fastify app signs its responses in an async onSend hook (a few ms away), and maps a declined
 * charge to 402. The client's timeout fires while the card is charged: the response is written
 * after the handler returned, to the closed socket, and is stored and replayed as written. An
 * earlier fix (fea59b5, same day) concluded the run one tick after the handler returned, so the
 * retry heard "201, not replayable" (found by helper-71).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import fp from 'fastify-plugin';
import { createHash, randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { sendAndGiveUp } from '../fixtures/client-gone.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const charges = new Map<string, number>();

@Controller('charges')
class ChargesController {
  @Post()
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

const signing = fp(async (fastify: any) => {
  fastify.addHook('onSend', async (_req: any, reply: any, payload: unknown) => {
    if (typeof payload !== 'string') return payload;
    await sleep(15); // KMS sign
    reply.header('x-signature', createHash('sha256').update(payload).digest('hex'));
    if (payload.includes('"status":"declined"')) reply.code(402);
    return payload;
  });
});

describe('Fastify async onSend hook, client gone', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('fhook');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [ChargesController],
    })
    class AppModule {}
    ({ url, close } = await listenApp(AppModule, 'fastify', async (app) =>
      (app as NestFastifyApplication).register(signing as never),
    ));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('control: client stays; receipt and 402 stored and replayed', async () => {
    for (const decline of [false, true]) {
      const key = randomUUID();
      const ref = randomUUID();
      const first = await send(url, '/charges', { key, body: { ref, decline } });
      const retry = await send(url, '/charges', { key, body: { ref, decline } });
      expect([first.status, retry.status, retry.text, charges.get(ref)]).toEqual([
        decline ? 402 : 201,
        decline ? 402 : 201,
        first.text,
        1,
      ]);
    }
  });

  for (const decline of [false, true]) {
    it(`client gone (${decline ? 'declined' : 'succeeded'}): the retry replays ${decline ? 402 : 201} with the body`, async () => {
      const key = randomUUID();
      const ref = randomUUID();
      await sendAndGiveUp(url, '/charges', key, { ref, decline }, 100);
      await sleep(800);
      const retry = await send(url, '/charges', { key, body: { ref, decline } });
      expect({ charges: charges.get(ref), status: retry.status, body: retry.text }).toEqual({
        charges: 1,
        status: decline ? 402 : 201,
        body: JSON.stringify({ id: `pay_${ref}`, ref, status: decline ? 'declined' : 'succeeded' }),
      });
    });
  }
});
