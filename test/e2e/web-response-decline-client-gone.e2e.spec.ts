/**
 * helper-74: a handler that answers with a web `Response` carrying its own status (a decline,
 * 402). The client's timeout fired first; Nest writes nothing to a closed socket, and after a
 * lease of silence the library records the run with the route's success status (201), although
 * the handler's own answer (in the value it returned) was 402. The retry is told the card was
 * charged (`original_status: 201`).
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

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent()
  async charge(@Body() body: { ref: string }) {
    await sleep(500); // the processor declines
    return new Response(JSON.stringify({ code: 'card_declined', ref: body.ref }), {
      status: 402,
      headers: { 'content-type': 'application/json' },
    });
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`web Response 402, client gone (${platform})`, () => {
    let db: MigratedDatabase;
    let url: string;
    let close: () => Promise<void>;
    beforeAll(async () => {
      db = await createMigratedDatabase('a74web402');
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            dataSource: db.dataSource,
            cleanup: { enabled: false },
            leaseSeconds: 2,
          }),
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

    it('the record and the retry say 402, not 201', async () => {
      const key = randomUUID();
      const ref = randomUUID();
      const connected = await send(url, '/charges', { key: randomUUID(), body: { ref } });
      await sendAndGiveUp(url, '/charges', key, { ref }, 150);
      await sleep(3_500);
      const [record] = await db.records('idempotency_key = $1', [key]);
      const retry = await send(url, '/charges', { key, body: { ref } });
      const told = retry.status === 409 ? retry.json().original_status : retry.status;
      expect({
        connectedClientGot: connected.status,
        stored: record?.status_code,
        retryToldStatus: told,
      }).toEqual({
        connectedClientGot: 402,
        stored: 402,
        retryToldStatus: 402,
      });
    }, 20_000);
  });
}
