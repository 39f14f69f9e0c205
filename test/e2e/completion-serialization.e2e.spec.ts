import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { QueryRunner } from 'typeorm';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import {
  createMigratedDatabase,
  defaultIsolation,
  type MigratedDatabase,
} from '../fixtures/migrated-database.js';

/**
 * REPEATABLE READ as the database's default: a completion outside a transaction is a transaction
 * of its own, and PostgreSQL refuses it (40001, concurrent update) when another transaction
 * updated the claim's row after its snapshot, as a lease renewal does. Sent again, it stores the
 * whole outcome; before, the store fell back to the bytes alone, without the transaction id.
 */
describe('a completion refused as a serialization failure (REPEATABLE READ)', () => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;
  const renewals: Promise<unknown>[] = [];

  beforeAll(async () => {
    db = await createMigratedDatabase('completion_serialization');
    await defaultIsolation(db, 'repeatable read');
    const dataSource = db.newDataSource();
    await dataSource.initialize();
    const other = db.newDataSource();
    await other.initialize();

    // What a renewal does to the row, from another connection, committed once the completion
    // waits on its row lock.
    const renewMeanwhile = async (key: string) => {
      const runner: QueryRunner = other.createQueryRunner();
      await runner.startTransaction();
      await runner.query(
        `UPDATE idempotency_keys SET locked_until = locked_until + interval '1 second'
          WHERE idempotency_key = $1`,
        [key],
      );
      renewals.push(
        new Promise((resolve) => setTimeout(resolve, 300))
          .then(() => runner.commitTransaction())
          .finally(() => runner.release()),
      );
    };

    @Controller('charges')
    class ChargesController {
      @Post()
      @Idempotent({ transactionId: (body) => (body as { id?: string } | undefined)?.id })
      async charge(@Body() body: { key: string }) {
        await renewMeanwhile(body.key);
        return { id: `pay_${body.key}` };
      }
    }
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource, cleanup: { enabled: false }, replayCache: false }),
      ],
      controllers: [ChargesController],
    })
    class AppModule {}
    const app = await listenApp(AppModule);
    url = app.url;
    close = async () => {
      await app.close();
      await other.destroy();
    };
  });
  afterAll(async () => {
    await Promise.allSettled(renewals);
    await close?.();
    await db?.drop();
  });

  it('is sent again and stores the outcome whole: transaction id and queryable body', async () => {
    const key = randomUUID();
    const first = await send(url, '/charges', { key, body: { key } });
    expect(first.status).toBe(201);
    await Promise.all(renewals);
    const [row] = await db.records('idempotency_key = $1', [key]);
    expect(row).toMatchObject({
      status: 'completed',
      status_code: 201,
      transaction_id: `pay_${key}`,
      response_body: { id: `pay_${key}` },
    });
    const replay = await send(url, '/charges', { key, body: { key } });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(first.body)).toBe(true);
  });
});
