/**
 * An app interceptor that calls the route again while the first call still runs: a hedged request
 * (race the call against a copy sent after 100 ms, a tail-latency pattern) or a re-call from the
 * first answer (`mergeMap` on a "pending" result). Nest calls the idempotency interceptor again
 * for the same request; that second call is refused as in progress, never passed to the handler.
 * The first run is recorded as run without a body: the client got the refusal, not its response.
 * Found by a review attacking the retry fix (the second call was taken for a nested attachment).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  CallHandler,
  Controller,
  ExecutionContext,
  Injectable,
  Module,
  NestInterceptor,
  Post,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { mergeMap, of, race, switchMap, timer } from 'rxjs';
import {
  Idempotent,
  IdempotencyCtx,
  type IdempotencyContext,
  IdempotencyModule,
} from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import type { Platform } from '../fixtures/payments.fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const charges = new Map<string, { n: number; claimed: boolean }[]>();

/** Sends a hedge copy of a call that has not answered in 100 ms; the first answer wins. */
@Injectable()
class HedgeInterceptor implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler) {
    const req = _ctx.switchToHttp().getRequest();
    if (req.headers['x-poll']) {
      // Calls again when the answer says "pending" (a soft failure), subscribing from its value.
      return next.handle().pipe(mergeMap((v: any) => (v?.pending ? next.handle() : of(v))));
    }
    return race(next.handle(), timer(100).pipe(switchMap(() => next.handle())));
  }
}

@Controller('payments')
class PaymentsController {
  @Post()
  @Idempotent()
  async create(
    @Body() body: { ref: string },
    @IdempotencyCtx() idem: IdempotencyContext | undefined,
  ) {
    const list = charges.get(body.ref) ?? [];
    const n = list.length + 1;
    list.push({ n, claimed: idem !== undefined });
    charges.set(body.ref, list);
    // The first run is slow (a slow processor); a second run would be fast.
    await sleep(n === 1 ? 400 : 10);
    return { ref: body.ref, n };
  }

  /** The same, writing its charge through the run's transaction. */
  @Post('tx')
  @Idempotent({ transactional: true })
  async tx(@Body() body: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
    const list = charges.get(body.ref) ?? [];
    const n = list.length + 1;
    list.push({ n, claimed: idem !== undefined });
    charges.set(body.ref, list);
    await idem.manager!.query('INSERT INTO ledger (ref, n) VALUES ($1, $2)', [body.ref, n]);
    await sleep(n === 1 ? 400 : 10);
    return { ref: body.ref, n, pending: n === 1 };
  }
}

describe.each(['express', 'fastify'] as Platform[])(
  'an app interceptor calling the route again (%s)',
  (platform) => {
    let db: MigratedDatabase;
    let app: ListeningApp;
    beforeAll(async () => {
      db = await createMigratedDatabase(`hedge_${platform}`);
      await db.dataSource.query('CREATE TABLE ledger (ref text NOT NULL, n int NOT NULL)');
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            dataSource: db.dataSource,
            replayCache: false,
            cleanup: { enabled: false },
          }),
        ],
        controllers: [PaymentsController],
        providers: [{ provide: APP_INTERCEPTOR, useClass: HedgeInterceptor }],
      })
      class AppModule {}
      app = await listenApp(AppModule, platform);
    });
    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    it('never runs the handler a second time for one key, nor without a claim', async () => {
      const ref = randomUUID();
      const key = randomUUID();
      const first = await send(app.url, '/payments', { key, body: { ref } });
      expect(first.status).toBe(409);
      expect(first.json()).toMatchObject({ code: 'request_in_progress' });
      await sleep(600);
      const again = await send(app.url, '/payments', { key, body: { ref } });
      expect(again.json()).toMatchObject({
        code: 'idempotency_response_not_replayable',
        original_status: 201,
      });
      expect(charges.get(ref)).toEqual([{ n: 1, claimed: true }]);
    });

    it('transactional: a hedge never adds its writes to the claimed run', async () => {
      const ref = randomUUID();
      const key = randomUUID();
      const first = await send(app.url, '/payments/tx', { key, body: { ref } });
      expect(first.status).toBe(409);
      await sleep(600);
      const ledger = await db.dataSource.query('SELECT n FROM ledger WHERE ref = $1 ORDER BY n', [
        ref,
      ]);
      expect(ledger).toEqual([{ n: 1 }]);
      const [record] = await db.records('idempotency_key = $1', [key]);
      expect(record).toMatchObject({ status: 'completed', status_code: 201, response_raw: null });
    });

    it('an interceptor calling again from the first answer (mergeMap) never runs a returned handler again', async () => {
      const ref = randomUUID();
      const key = randomUUID();
      const first = await send(app.url, '/payments/tx', {
        key,
        body: { ref },
        headers: [['x-poll', '1']],
      });
      expect(first.json()).toMatchObject({ code: 'request_in_progress' });
      await sleep(300);
      const again = await send(app.url, '/payments/tx', { key, body: { ref } });
      expect(again.json()).toMatchObject({ code: 'idempotency_response_not_replayable' });
      const ledger = await db.dataSource.query('SELECT n FROM ledger WHERE ref = $1 ORDER BY n', [
        ref,
      ]);
      expect(ledger).toEqual([{ n: 1 }]);
    });
  },
);
