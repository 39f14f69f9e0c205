/**
 * An app-wide interceptor (outside @Idempotent(), where the docs put app interceptors) awaits an
 * audit write after the handler returned and maps a declined charge to 402. The client's timeout
 * fires while the card processor runs: what is written afterwards to the closed socket is stored
 * and replayed, 201 with its receipt or the 402. fea59b5 (same day) concluded the run one tick
 * after the handler returned, as "201, not replayable" (found by helper-71).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  type CallHandler,
  Controller,
  type ExecutionContext,
  HttpException,
  Injectable,
  Module,
  type NestInterceptor,
  Post,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { mergeMap } from 'rxjs';
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
  return { id: `pay_${ref}`, ref, status: decline ? 'declined' : 'succeeded' };
}

/** App-wide: writes an audit row (a few ms), then maps a declined charge to 402. */
@Injectable()
class AuditInterceptor implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(
      mergeMap(async (v: { status?: string }) => {
        await sleep(30); // the audit INSERT
        if (v?.status === 'declined') {
          throw new HttpException({ code: 'card_declined', charge: v }, 402);
        }
        return v;
      }),
    );
  }
}

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent()
  charge(@Body() body: { ref: string; decline?: boolean }) {
    return chargeCard(body.ref, !!body.decline);
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`outer async interceptor, client gone (${platform})`, () => {
    let db: MigratedDatabase;
    let url: string;
    let close: () => Promise<void>;

    beforeAll(async () => {
      db = await createMigratedDatabase('outer');
      @Module({
        imports: [
          IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
        ],
        controllers: [ChargesController],
        providers: [{ provide: APP_INTERCEPTOR, useClass: AuditInterceptor }],
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
      const ref = `${platform}-stay-${randomUUID()}`;
      const first = await send(url, '/charges', { key, body: { ref, decline: true } });
      const retry = await send(url, '/charges', { key, body: { ref, decline: true } });
      expect([first.status, retry.status, charges.get(ref)]).toEqual([402, 402, 1]);
      expect(retry.text).toBe(first.text);
    });

    it('client gone, succeeded: the retry gets the 201 receipt that was written', async () => {
      const key = randomUUID();
      const ref = `${platform}-ok-${randomUUID()}`;
      await sendAndGiveUp(url, '/charges', key, { ref }, 100);
      await sleep(800);
      const retry = await send(url, '/charges', { key, body: { ref } });
      expect({ charges: charges.get(ref), status: retry.status, body: retry.text }).toEqual({
        charges: 1,
        status: 201,
        body: JSON.stringify({ id: `pay_${ref}`, ref, status: 'succeeded' }),
      });
    });

    it('client gone, declined: the retry hears 402 (the status the client would have got), never 201', async () => {
      const key = randomUUID();
      const ref = `${platform}-declined-${randomUUID()}`;
      await sendAndGiveUp(url, '/charges', key, { ref, decline: true }, 100);
      await sleep(800);
      const retry = await send(url, '/charges', { key, body: { ref, decline: true } });
      expect({ charges: charges.get(ref), status: retry.status, body: retry.text }).toEqual({
        charges: 1,
        status: 402,
        body: expect.stringContaining('card_declined'),
      });
    });
  });
}
