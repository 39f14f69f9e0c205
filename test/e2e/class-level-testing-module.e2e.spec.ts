import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Body, Controller, type INestApplication, Module, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { idempotencyMigrations } from '../../migrations/index.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';
import { send } from '../fixtures/http-client.js';

/**
 * attack-82. The README's quick start (TypeOrmModule + forRootAsync({ inject: [DataSource] })),
 * with `@Idempotent()` on the controller class, tested the way the NestJS docs test an app: a
 * fresh `Test.createTestingModule({ imports: [AppModule] })` app per test, closed after it. The
 * first test passed; in every later one each keyed request answered `503
 * idempotency_store_unavailable` (the handler never ran), because the controller's handler still
 * carried the first app's interceptor instance, whose DataSource TypeORM closed with that app.
 */
@Controller('payments')
@Idempotent({ required: true })
class PaymentsController {
  @Post()
  charge(@Body() dto: { amount: number; currency: string }) {
    return { id: `pay_${randomUUID()}`, status: 'succeeded', ...dto };
  }
}

let db: TestDatabase;

@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      useFactory: () => ({
        type: 'postgres',
        url: db.url,
        migrations: [...idempotencyMigrations],
        migrationsRun: true,
      }),
    }),
    IdempotencyModule.forRootAsync({
      inject: [DataSource],
      useFactory: (dataSource: DataSource) => ({ dataSource, cleanup: { enabled: false } }),
    }),
  ],
  controllers: [PaymentsController],
})
class AppModule {}

describe('PaymentsController (e2e), one app per test', () => {
  let app: INestApplication;
  let url: string;
  beforeAll(async () => {
    db = await createTestDatabase('attack82_testing_module');
  });
  afterAll(async () => db?.drop());
  beforeEach(async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  });
  afterEach(async () => app?.close());

  const chargeAndRetry = async () => {
    const key = randomUUID();
    const first = await send(url, '/payments', { key, body: { amount: 500, currency: 'eur' } });
    const retry = await send(url, '/payments', { key, body: { amount: 500, currency: 'eur' } });
    return {
      first: first.status,
      retry: retry.status,
      replayed: retry.headers['idempotent-replayed'],
    };
  };

  it('first test: charges and replays', async () => {
    expect(await chargeAndRetry()).toEqual({ first: 201, retry: 201, replayed: 'true' });
  });

  it('second test: charges and replays the same way', async () => {
    expect(await chargeAndRetry()).toEqual({ first: 201, retry: 201, replayed: 'true' });
  });
});
