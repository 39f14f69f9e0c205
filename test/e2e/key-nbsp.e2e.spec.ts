/**
 * A key ending in byte 0xA0 (NBSP, which Node's parser lets through as obs-text) is refused with
 * 400 idempotency_key_invalid like any other non-ASCII byte (here 0xA1), on both platforms: the
 * parser trims only HTTP whitespace (SP, HTAB), not everything String.prototype.trim() strips, so
 * `<uuid>\xA0` is not taken as `<uuid>` and does not replay its response.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { keyedRequestHead, sendRaw } from '../fixtures/raw-socket.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';

let runs = 0;
@Controller('pay')
class PayController {
  @Post()
  @Idempotent()
  charge(@Body() _body: unknown) {
    runs++;
    return { id: `pay_${randomUUID()}` };
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`a key with a trailing 0xA0 byte (${platform})`, () => {
    let db: MigratedDatabase;
    let app: ListeningApp;
    let port: number;
    beforeAll(async () => {
      db = await createMigratedDatabase('key_nbsp');
      @Module({
        imports: [
          IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
        ],
        controllers: [PayController],
      })
      class AppModule {}
      app = await listenApp(AppModule, platform);
      port = Number(new URL(app.url).port);
    });
    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    it('is refused like any other non-ASCII byte', async () => {
      const body = Buffer.from('{"amount":1}');
      const key = Buffer.from(randomUUID(), 'latin1');
      const withA1 = Buffer.concat([key, Buffer.from([0xa1])]);
      const withA0 = Buffer.concat([key, Buffer.from([0xa0])]);
      const a1 = await sendRaw(port, keyedRequestHead('/pay', withA1, body.length), body);
      expect(a1.status).toBe(400); // held: 0xA1 is refused
      const a0 = await sendRaw(port, keyedRequestHead('/pay', withA0, body.length), body);
      expect(a0.status).toBe(400);
      expect(a0.body).toContain('idempotency_key_invalid');
      expect(runs).toBe(0); // neither ran the handler
    });
  });
}
