/**
 * helper-74: a transactional `@Res()` handler that answers from a callback (a processor that
 * takes longer than a lease to decide, e.g. 3-D Secure), and the client's timeout fired first.
 * docs/behaviour-and-states.md: "what is written afterwards (... a `@Res()` callback's) goes to
 * the closed socket and is stored as written (replayed to the retry)"; only a body Nest streams
 * is concluded after a lease of silence. The code concludes every handler-returned run after a
 * lease of silence: the record says 201 (ran) while the processor declined (402), the decline's
 * ledger row is refused (the transaction was already committed), and the retry is told 201.
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
const callbackErrors: string[] = [];

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent({ transactional: true })
  charge(
    @Body() body: { ref: string },
    @IdempotencyCtx() idem: IdempotencyContext,
    @Res() res: any,
  ) {
    charges.set(body.ref, (charges.get(body.ref) ?? 0) + 1);
    // The processor answers after 4.5 s (lease: 3 s): declined.
    sleep(4_500)
      .then(async () => {
        await idem.manager!.query('INSERT INTO ledger (ref, outcome) VALUES ($1, $2)', [
          body.ref,
          'declined',
        ]);
        res.status(402).json({ code: 'card_declined', ref: body.ref });
      })
      .catch((err: Error) => {
        callbackErrors.push(err.message);
        res.status(500).json({ code: 'internal' });
      });
  }
}

describe('transactional @Res() callback slower than a lease, client gone', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase('a74rescb');
    await db.dataSource.query('CREATE TABLE ledger (ref text PRIMARY KEY, outcome text)');
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          leaseSeconds: 3,
          maxHoldSeconds: 60,
        }),
      ],
      controllers: [ChargesController],
    })
    class AppModule {}
    ({ url, close } = await listenApp(AppModule, 'express'));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  it('stores what the callback wrote (402) with its ledger row, as documented', async () => {
    const key = randomUUID();
    const ref = `rescb-${randomUUID()}`;
    await sendAndGiveUp(url, '/charges', key, { ref }, 150);
    await sleep(6_000);
    const [record] = await db.records('idempotency_key = $1', [key]);
    const ledger = await db.dataSource.query('SELECT outcome FROM ledger WHERE ref = $1', [ref]);
    const retry = await send(url, '/charges', { key, body: { ref } });
    expect({
      stored: record?.status_code,
      ledger: ledger.map((r: { outcome: string }) => r.outcome),
      retry: retry.status,
      retryBody: retry.status === 402 ? 'decline' : retry.text,
      callbackErrors,
      charges: charges.get(ref),
    }).toEqual({
      stored: 402,
      ledger: ['declined'],
      retry: 402,
      retryBody: 'decline',
      callbackErrors: [],
      charges: 1,
    });
  }, 30_000);
});
