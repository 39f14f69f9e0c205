/**
 * Runs that outlive `maxHoldSeconds` (helper-73). With the client still connected nothing is
 * concluded early: an outer interceptor's late 402 is what is stored, and a transactional
 * `@Res()` callback's ledger row commits with the record. A handler that returns after the hold
 * ran out, to a client that left, is recorded as run before its lease lapses: one charge. An
 * earlier version of the same day's fix (09876e7) concluded any run at `maxHoldSeconds`, client
 * or not, and missed one that returned after it.
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
  Res,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { mergeMap } from 'rxjs';
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
const hit = (ref: string) => charges.set(ref, (charges.get(ref) ?? 0) + 1);

/** App-wide: slow post-processing (fraud scoring, audit) after the handler, then maps a decline to 402. */
@Injectable()
class PostProcessInterceptor implements NestInterceptor {
  intercept(ctx: ExecutionContext, next: CallHandler) {
    const req = ctx.switchToHttp().getRequest();
    if (!String(req.url).includes('/decline')) return next.handle();
    return next.handle().pipe(
      mergeMap(async (v: { status?: string }) => {
        await sleep(2_500);
        if (v?.status === 'declined') {
          throw new HttpException({ code: 'card_declined', charge: v }, 402);
        }
        return v;
      }),
    );
  }
}

const reply = (res: any, status: number, body: unknown) =>
  typeof res.code === 'function' ? res.code(status).send(body) : res.status(status).json(body);

@Controller('charges')
class ChargesController {
  @Post('decline')
  @Idempotent()
  async decline(@Body() body: { ref: string }) {
    hit(body.ref);
    await sleep(300);
    return { id: `pay_${body.ref}`, ref: body.ref, status: 'declined' };
  }

  @Post('res-tx')
  @Idempotent({ transactional: true })
  resTx(
    @Body() body: { ref: string },
    @IdempotencyCtx() idem: IdempotencyContext,
    @Res() res: any,
  ) {
    hit(body.ref);
    sleep(2_500)
      .then(async () => {
        await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref]);
        reply(res, 201, { id: `pay_${body.ref}` });
      })
      .catch(() => reply(res, 500, { code: 'internal' }));
  }

  @Post('slow-web')
  @Idempotent()
  async slowWeb(@Body() body: { ref: string }) {
    hit(body.ref);
    await sleep(2_500);
    return new Response(JSON.stringify({ id: `pay_${body.ref}` }), {
      status: 201,
      headers: { 'content-type': 'application/json' },
    });
  }

  @Post('slow-json')
  @Idempotent()
  async slowJson(@Body() body: { ref: string }) {
    hit(body.ref);
    await sleep(2_500);
    return { id: `pay_${body.ref}` };
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`maxHoldSeconds with a late write (${platform})`, () => {
    let db: MigratedDatabase;
    let url: string;
    let close: () => Promise<void>;

    beforeAll(async () => {
      db = await createMigratedDatabase('late');
      await db.dataSource.query('CREATE TABLE ledger (ref text PRIMARY KEY)');
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            dataSource: db.dataSource,
            cleanup: { enabled: false },
            leaseSeconds: 3,
            maxHoldSeconds: 2,
          }),
        ],
        controllers: [ChargesController],
        providers: [{ provide: APP_INTERCEPTOR, useClass: PostProcessInterceptor }],
      })
      class AppModule {}
      ({ url, close } = await listenApp(AppModule, platform));
    });
    afterAll(async () => {
      await close?.();
      await db?.drop();
    });

    it('client connected, decline mapped to 402 after the hold: the retry hears the decline', async () => {
      const key = randomUUID();
      const ref = `${platform}-decline-${randomUUID()}`;
      const first = await send(url, '/charges/decline', { key, body: { ref } });
      await sleep(200);
      const [record] = await db.records('idempotency_key = $1', [key]);
      const retry = await send(url, '/charges/decline', { key, body: { ref } });
      expect({
        first: first.status,
        stored: record?.response_status ?? record?.status_code,
        retry: retry.status,
        retryBody: retry.text,
        charges: charges.get(ref),
      }).toEqual({ first: 402, stored: 402, retry: 402, retryBody: first.text, charges: 1 });
    }, 20_000);

    it('transactional @Res() callback after the hold, client connected: ledger committed with the record', async () => {
      const key = randomUUID();
      const ref = `${platform}-restx-${randomUUID()}`;
      const first = await send(url, '/charges/res-tx', { key, body: { ref } });
      await sleep(200);
      const [record] = await db.records('idempotency_key = $1', [key]);
      const ledger = await db.dataSource.query('SELECT ref FROM ledger WHERE ref = $1', [ref]);
      expect({
        first: first.status,
        status: record?.status,
        ledgerRows: ledger.length,
      }).toEqual({ first: 201, status: 'completed', ledgerRows: 1 });
    }, 20_000);

    for (const kind of ['slow-json', 'slow-web']) {
      it(`${kind}: handler returns after the hold ran out, within its lease, client gone: no second charge`, async () => {
        const key = randomUUID();
        const ref = `${platform}-${kind}-${randomUUID()}`;
        await sendAndGiveUp(url, `/charges/${kind}`, key, { ref }, 150);
        await sleep(2_800); // handler returned at ~2.5 s, lease (3 s, last renewed ~1.3 s) still held
        await sleep(3_500); // past the lease
        const [record] = await db.records('idempotency_key = $1', [key]);
        const retry = await send(url, `/charges/${kind}`, { key, body: { ref } });
        expect({
          status: record?.status,
          charges: charges.get(ref),
          retryRanAgain: retry.status === 201 && charges.get(ref) !== 1,
        }).toEqual({ status: 'completed', charges: 1, retryRanAgain: false });
      }, 20_000);
    }
  });
}
