/**
 * A graceful shutdown (a rolling deploy) while a run whose client left waits for an answer that
 * will never be written (its handler returned a web Response Nest does not start for a closed
 * socket): the shutdown records it as run before the DataSource closes, so the client's retry on
 * the next instance is answered from the record, never charged again (helper-73).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
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
  @Post('web')
  @Idempotent()
  async web(@Body() body: { ref: string }) {
    charges.set(body.ref, (charges.get(body.ref) ?? 0) + 1);
    await sleep(400);
    return new Response(JSON.stringify({ id: `pay_${randomUUID()}`, ref: body.ref }), {
      status: 201,
      headers: { 'content-type': 'application/json' },
    });
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`graceful shutdown while a returned run waits for maxHold (${platform})`, () => {
    let db: MigratedDatabase;

    beforeAll(async () => {
      db = await createMigratedDatabase('shuthold');
    });
    afterAll(async () => {
      await db?.drop();
    });

    /** Each instance gets its own DataSource, which the module initializes and closes. */
    function appModule() {
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            dataSource: db.newDataSource(),
            cleanup: { enabled: false },
            leaseSeconds: 2,
            maxHoldSeconds: 8,
          }),
        ],
        controllers: [ChargesController],
      })
      class AppModule {}
      return AppModule;
    }

    it('the retry after the deploy does not charge again', async () => {
      const first = await listenApp(appModule(), platform);
      const key = randomUUID();
      const ref = `${platform}-${randomUUID()}`;
      await sendAndGiveUp(first.url, '/charges/web', key, { ref }, 150);
      await sleep(500); // the handler returned (charged); nothing was written
      await first.close(); // the deploy's SIGTERM
      const [afterClose] = await db.records('idempotency_key = $1', [key]);
      await sleep(3_000); // the lease (2 s) ends; the next instance takes the traffic
      const second = await listenApp(appModule(), platform);
      try {
        const retry = await send(second.url, '/charges/web', { key, body: { ref } });
        expect({
          statusAfterClose: afterClose?.status,
          charges: charges.get(ref),
          retry: retry.status,
        }).toEqual({ statusAfterClose: 'completed', charges: 1, retry: 409 });
      } finally {
        await second.close();
      }
    }, 30_000);
  });
}
