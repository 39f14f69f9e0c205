/**
 * An Express-style @Res() handler that answers from a callback (the charge's promise is not
 * returned). When the client's timeout fired first, what the callback sends later (201 or the 402
 * decline) is still stored and replayed. fea59b5 (same day) completed the key as "201, not
 * replayable" as soon as the handler function returned (found by helper-71).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post, Res } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { sendAndGiveUp } from '../fixtures/client-gone.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const charges = new Map<string, number>();

async function chargeCard(ref: string, decline: boolean) {
  charges.set(ref, (charges.get(ref) ?? 0) + 1);
  await sleep(300);
  if (decline) throw Object.assign(new Error('card declined'), { code: 'card_declined' });
  return { id: `pay_${ref}`, ref, status: 'succeeded' };
}

const reply = (res: any, status: number, body: unknown) =>
  typeof res.code === 'function' ? res.code(status).send(body) : res.status(status).json(body);

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent()
  charge(@Body() body: { ref: string; decline?: boolean }, @Res() res: any) {
    chargeCard(body.ref, !!body.decline).then(
      (receipt) => reply(res, 201, receipt),
      (err) => reply(res, 402, { code: err.code }),
    );
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`@Res() callback handler, client gone (${platform})`, () => {
    let db: MigratedDatabase;
    let url: string;
    let close: () => Promise<void>;

    beforeAll(async () => {
      db = await createMigratedDatabase('rescb');
      @Module({
        imports: [
          IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
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

    it('control: client stays, declined → 402 stored and replayed', async () => {
      const key = randomUUID();
      const ref = randomUUID();
      const first = await send(url, '/charges', { key, body: { ref, decline: true } });
      const retry = await send(url, '/charges', { key, body: { ref, decline: true } });
      expect([first.status, retry.status, charges.get(ref)]).toEqual([402, 402, 1]);
    });

    it('client gone, declined: the retry hears 402, never 201', async () => {
      const key = randomUUID();
      const ref = randomUUID();
      await sendAndGiveUp(url, '/charges', key, { ref, decline: true }, 100);
      await sleep(700);
      const retry = await send(url, '/charges', { key, body: { ref, decline: true } });
      expect({ charges: charges.get(ref), status: retry.status, body: retry.text }).toEqual({
        charges: 1,
        status: 402,
        body: expect.stringContaining('card_declined'),
      });
    });

    it('client gone, succeeded: the retry gets the receipt', async () => {
      const key = randomUUID();
      const ref = randomUUID();
      await sendAndGiveUp(url, '/charges', key, { ref }, 100);
      await sleep(700);
      const retry = await send(url, '/charges', { key, body: { ref } });
      expect({ charges: charges.get(ref), status: retry.status }).toEqual({
        charges: 1,
        status: 201,
      });
    });
  });
}
