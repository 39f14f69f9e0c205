/**
 * Transactional modes with an Express-style @Res() handler that records the charge in the ledger
 * (through idem.manager) from the processor's callback. When the client's timeout fired first,
 * the ledger row still commits with the record. fea59b5 (same day) committed as soon as the
 * handler function returned, before the callback's INSERT (found by helper-71).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post, Res } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { sendAndGiveUp } from '../fixtures/client-gone.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const charges = new Map<string, number>();
const errors: string[] = [];

async function chargeCard(ref: string) {
  charges.set(ref, (charges.get(ref) ?? 0) + 1);
  await sleep(300);
  return { id: `pay_${ref}`, ref, status: 'succeeded' };
}

const reply = (res: any, status: number, body: unknown) =>
  typeof res.code === 'function' ? res.code(status).send(body) : res.status(status).json(body);

@Controller('charges')
class ChargesController {
  @Post(':mode')
  @Idempotent({ transactional: true })
  chargeTx(
    @Body() body: { ref: string },
    @IdempotencyCtx() idem: IdempotencyContext,
    @Res() res: any,
  ) {
    this.run(body, idem, res);
  }

  @Post('single/:mode')
  @Idempotent({ transactional: 'single' })
  chargeSingle(
    @Body() body: { ref: string },
    @IdempotencyCtx() idem: IdempotencyContext,
    @Res() res: any,
  ) {
    this.run(body, idem, res);
  }

  private run(body: { ref: string }, idem: IdempotencyContext, res: any) {
    chargeCard(body.ref)
      .then(async (receipt) => {
        await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref]);
        reply(res, 201, receipt);
      })
      .catch((err: Error) => {
        errors.push(err.message);
        reply(res, 500, { code: 'internal' });
      });
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`transactional @Res() callback, client gone (${platform})`, () => {
    let db: MigratedDatabase;
    let url: string;
    let close: () => Promise<void>;

    beforeAll(async () => {
      db = await createMigratedDatabase('restx');
      await db.dataSource.query('CREATE TABLE ledger (ref text PRIMARY KEY)');
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

    const ledger = async (ref: string) =>
      (await db.dataSource.query('SELECT ref FROM ledger WHERE ref = $1', [ref])).length;

    for (const path of ['/charges/x', '/charges/single/x']) {
      it(`${path} control: client stays, the ledger row commits`, async () => {
        const key = randomUUID();
        const ref = randomUUID();
        const first = await send(url, path, { key, body: { ref } });
        expect([first.status, await ledger(ref), charges.get(ref)]).toEqual([201, 1, 1]);
      });

      it(`${path} client gone: charged once, the ledger row commits`, async () => {
        const key = randomUUID();
        const ref = randomUUID();
        await sendAndGiveUp(url, path, key, { ref }, 100);
        await sleep(800);
        const retry = await send(url, path, { key, body: { ref } });
        expect({
          charges: charges.get(ref),
          ledger: await ledger(ref),
          retry: retry.status,
        }).toEqual({ charges: 1, ledger: 1, retry: 201 });
      });
    }
  });
}
