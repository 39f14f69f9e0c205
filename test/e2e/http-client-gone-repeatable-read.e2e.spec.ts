/**
 * `transactional: true` under REPEATABLE READ (a managed database's default isolation): the
 * claim's row is locked in the handler's transaction and lease renewals stop. The handler
 * writes its ledger row, then returns a body Nest streams to a client that left: nothing is
 * written. The run is still concluded (ledger committed, record completed without a body),
 * not left open with its connection and row lock until the process ends (helper-73).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post, StreamableFile } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../lib/index.js';
import {
  createMigratedDatabase,
  defaultIsolation,
  type MigratedDatabase,
} from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { sendAndGiveUp } from '../fixtures/client-gone.js';
import { withAdminClient } from '../harness/test-database.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const charges = new Map<string, number>();

@Controller('charges')
class ChargesController {
  @Post('file')
  @Idempotent({ transactional: true })
  async file(@Body() body: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
    charges.set(body.ref, (charges.get(body.ref) ?? 0) + 1);
    await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref]);
    await sleep(400);
    return new StreamableFile(Buffer.from(JSON.stringify({ ref: body.ref })), {
      type: 'application/json',
    });
  }

  @Post('web')
  @Idempotent({ transactional: true })
  async web(@Body() body: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
    charges.set(body.ref, (charges.get(body.ref) ?? 0) + 1);
    await idem.manager!.query('INSERT INTO ledger (ref) VALUES ($1)', [body.ref]);
    await sleep(400);
    return new Response(JSON.stringify({ ref: body.ref }), {
      status: 201,
      headers: { 'content-type': 'application/json' },
    });
  }
}

for (const [platform, isolation] of [
  ['express', 'read committed'], // control: passes
  ['express', 'repeatable read'],
  ['fastify', 'repeatable read'],
] as const) {
  describe(`${isolation} transactional, client gone, stream never started (${platform})`, () => {
    let db: MigratedDatabase;
    let url: string;
    let close: () => Promise<void>;

    beforeAll(async () => {
      db = await createMigratedDatabase('rrhold');
      await db.dataSource.query(`CREATE TABLE ledger (ref text NOT NULL)`);
      if (isolation !== 'read committed') await defaultIsolation(db, isolation);
      const dataSource = db.newDataSource();
      await dataSource.initialize();
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            dataSource,
            cleanup: { enabled: false },
            leaseSeconds: 1,
            maxHoldSeconds: 2,
          }),
        ],
        controllers: [ChargesController],
      })
      class AppModule {}
      ({ url, close } = await listenApp(AppModule, platform));
    });
    afterAll(async () => {
      const t0 = Date.now();
      const log = (m: string) => process.stderr.write(`[teardown] ${m} ${Date.now() - t0}ms\n`);
      // Free whatever connection the stuck run holds, so the app can close.
      await db.dataSource
        .query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE datname = current_database() AND pid <> pg_backend_pid()`,
        )
        .catch(() => undefined);
      log('terminated');
      await close?.().catch(() => undefined);
      log('closed');
      // db.drop() would wait forever in pool.end() for the connection the stuck run checked out.
      await Promise.race([db?.drop(), sleep(3_000)]);
      await withAdminClient((c) => c.query(`DROP DATABASE IF EXISTS "${db.name}" WITH (FORCE)`));
      log('dropped');
    }, 60_000);

    for (const kind of ['file', 'web']) {
      it(`${kind}: concluded (completed, ledger committed) once the hold runs out`, async () => {
        const key = randomUUID();
        const ref = `${platform}-${kind}-${randomUUID()}`;
        await sendAndGiveUp(url, `/charges/${kind}`, key, { ref }, 150);
        // Well past maxHoldSeconds (2) + leaseSeconds (1).
        await sleep(5_000);
        const [record] = await db.records('idempotency_key = $1', [key]);
        const ledger = await db.dataSource.query('SELECT ref FROM ledger WHERE ref = $1', [ref]);
        const retry = await send(url, `/charges/${kind}`, { key, body: { ref } });
        expect({
          status: record?.status,
          ledgerRows: ledger.length,
          charges: charges.get(ref),
          retry: retry.status,
        }).toEqual({ status: 'completed', ledgerRows: 1, charges: 1, retry: 409 });
        expect(retry.text).toContain('not_replayable');
      }, 20_000);
    }
  });
}
