/**
 * helper-75: `transactionId(body, req)` "derives the transaction id from the response body as the client
 * received it" (docs/options.md), and a `storeResponse: 'digest'` route still gets the parsed
 * body "so reconciliation keeps working" (limits-and-choices.md). A JSON response larger than
 * `maxResponseBytes` is handed to `transactionId` as a string instead (completionOf: the body is
 * parsed only when storable or digest), so the README's `(body) => body?.id` finds nothing and
 * the record of a charge that ran has `transaction_id` NULL: the ledger cross-check reports the
 * charge as a payment without a completed record.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';

@Controller('payments')
class PaymentsController {
  @Post()
  @Idempotent({ required: true, transactionId: (body: any) => body?.id })
  charge(@Body() dto: { amount: number; lines: number }) {
    return {
      id: `pay_${randomUUID()}`,
      status: 'succeeded',
      amount: dto.amount,
      lines: Array.from({ length: dto.lines }, (_, i) => `line ${i}`),
    };
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`transactionId of a response over maxResponseBytes (${platform})`, () => {
    let db: MigratedDatabase;
    let app: ListeningApp;
    beforeAll(async () => {
      db = await createMigratedDatabase('atk75_txid');
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            dataSource: db.dataSource,
            cleanup: { enabled: false },
            maxResponseBytes: 256,
          }),
        ],
        controllers: [PaymentsController],
      })
      class AppModule {}
      app = await listenApp(AppModule, platform);
    });
    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    it('control: a small receipt records its id', async () => {
      const key = randomUUID();
      const res = await send(app.url, '/payments', { key, body: { amount: 5, lines: 1 } });
      const [record] = await db.records('idempotency_key = $1', [key]);
      expect(record.transaction_id).toBe(res.json().id);
    });

    it('a receipt over maxResponseBytes still records its id', async () => {
      const key = randomUUID();
      const res = await send(app.url, '/payments', { key, body: { amount: 5, lines: 100 } });
      expect(res.status).toBe(201);
      expect(res.body.length).toBeGreaterThan(256);
      const [record] = await db.records('idempotency_key = $1', [key]);
      expect(record.status).toBe('completed');
      expect(record.transaction_id).toBe(res.json().id);
    });
  });
}
