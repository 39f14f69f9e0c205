/**
 * helper-74: `transactional: true`, the handler writes its ledger row and returns a web
 * `Response` (a receipt); the client's timeout fired first. Nest writes nothing to the closed
 * socket, and the library keeps the handler's transaction open, idle, for a lease of silence
 * before it concludes the run. Managed PostgreSQL commonly sets
 * `idle_in_transaction_session_timeout` (here 1 s, lease 3 s): the server ends the session, the
 * conclusion's COMMIT fails, the run that completed is rolled back and its key released, and the
 * client's retry charges the card again.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
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

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent({ transactional: true })
  async charge(@Body() body: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
    charges.set(body.ref, (charges.get(body.ref) ?? 0) + 1);
    await sleep(400); // the processor
    await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [
      `${body.ref}-${randomUUID()}`,
    ]);
    return new Response(JSON.stringify({ id: `pay_${body.ref}` }), {
      status: 201,
      headers: { 'content-type': 'application/json' },
    });
  }
}

describe('transactional web Response, client gone, idle_in_transaction_session_timeout', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;
  beforeAll(async () => {
    db = await createMigratedDatabase('a74idle');
    await db.dataSource.query('CREATE TABLE ledger (ref text PRIMARY KEY)');
    await db.dataSource.query(
      `ALTER DATABASE "${db.name}" SET idle_in_transaction_session_timeout = '1s'`,
    );
    await db.dataSource.destroy();
    await db.dataSource.initialize();
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          leaseSeconds: 3,
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

  it('a connected client is answered and replayed (control)', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const first = await send(url, '/charges', { key, body: { ref } });
    const retry = await send(url, '/charges', { key, body: { ref } });
    expect([first.status, retry.status, charges.get(ref)]).toEqual([201, 409, 1]);
  }, 20_000);

  it('client gone: the run is recorded with its ledger row; the retry never charges again', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    await sendAndGiveUp(url, '/charges', key, { ref }, 150);
    await sleep(5_000);
    const [record] = await db.records('idempotency_key = $1', [key]);
    const ledger = await db.dataSource.query('SELECT ref FROM ledger WHERE ref LIKE $1', [
      `${ref}-%`,
    ]);
    const retry = await send(url, '/charges', { key, body: { ref } });
    expect({
      record: record?.status ?? 'none',
      ledgerRows: ledger.length,
      retry: retry.status,
      charges: charges.get(ref),
    }).toEqual({ record: 'completed', ledgerRows: 1, retry: 409, charges: 1 });
  }, 20_000);
});
