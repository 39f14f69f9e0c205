/**
 * A key header sent on two lines is refused, also when Node's joined value (`a, b`) reads as one
 * quoted key: `"<uuid1>` and `<uuid2>"`. Until 2026-12-05 that ran the handler under the merged
 * key `<uuid1>, <uuid2>` (found by helper-70).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';

let runs = 0;

@Controller('charges')
class ChargesController {
  @Post()
  @Idempotent()
  charge(@Body() _body: unknown) {
    runs++;
    return { id: randomUUID() };
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`a key header sent twice (${platform})`, () => {
    let db: MigratedDatabase;
    let app: ListeningApp;
    beforeAll(async () => {
      db = await createMigratedDatabase('key_twice');
      @Module({
        imports: [
          IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
        ],
        controllers: [ChargesController],
      })
      class AppModule {}
      app = await listenApp(AppModule, platform);
    });
    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    it('is refused when its joined halves read as one quoted key', async () => {
      const before = runs;
      const headers: [string, string][] = [
        ['Idempotency-Key', `"${randomUUID()}`],
        ['Idempotency-Key', `${randomUUID()}"`],
      ];
      const res = await send(app.url, '/charges', { headers, body: { amount: 700 } });
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toBe('application/problem+json');
      expect(JSON.parse(res.text)).toMatchObject({ code: 'idempotency_key_invalid' });
      expect(runs - before).toBe(0);
      expect(await db.records('true')).toHaveLength(0);
    });

    it('a quoted key with a comma, sent once, still runs and replays', async () => {
      const before = runs;
      const headers: [string, string][] = [['Idempotency-Key', `"order 7, try ${randomUUID()}"`]];
      const first = await send(app.url, '/charges', { headers, body: { amount: 700 } });
      const again = await send(app.url, '/charges', { headers, body: { amount: 700 } });
      expect([first.status, again.status]).toEqual([201, 201]);
      expect(again.text).toBe(first.text);
      expect(runs - before).toBe(1);
    });
  });
}
