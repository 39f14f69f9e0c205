/**
 * A @Res() handler that answers with Node's `res.writeHead(status, [name, value, ...])` (the flat
 * array form Node documents) has those headers stored like an object's: the replay carries the
 * content-type and location the client first got (Express and Fastify).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post, Res } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';

let runs = 0;
@Controller('pay')
class PayController {
  @Post()
  @Idempotent()
  charge(@Body() _body: unknown, @Res() res: any) {
    runs++;
    const raw = res.raw ?? res;
    raw.writeHead(201, ['Content-Type', 'application/json', 'Location', '/pay/1']);
    raw.end(JSON.stringify({ id: `pay_${randomUUID()}` }));
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`writeHead with a raw headers array (${platform})`, () => {
    let db: MigratedDatabase;
    let app: ListeningApp;
    beforeAll(async () => {
      db = await createMigratedDatabase('res_writehead_array');
      @Module({
        imports: [
          IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
        ],
        controllers: [PayController],
      })
      class AppModule {}
      app = await listenApp(AppModule, platform);
    });
    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    it('replays the content-type and location the client got', async () => {
      const key = randomUUID();
      const before = runs;
      const first = await send(app.url, '/pay', { key, body: { amount: 1 } });
      const retry = await send(app.url, '/pay', { key, body: { amount: 1 } });
      expect(runs - before).toBe(1);
      expect(first.headers['content-type']).toBe('application/json');
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(retry.text).toBe(first.text);
      expect(retry.headers.location).toBe('/pay/1');
      expect(retry.headers['content-type']).toBe('application/json');
    });
  });
}
