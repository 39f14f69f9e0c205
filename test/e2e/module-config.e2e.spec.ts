import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Module, Post, Body } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { idempotencyMigrations, idempotencySchema } from '../../migrations/index.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';

let runs = 0;
@Controller('transfers')
class TransfersController {
  @Post()
  @Idempotent()
  create(@Body() body: { amount: number }) {
    runs++;
    return { transfer: `tr_${runs}`, amount: body.amount };
  }
}

describe('module configuration', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('config');
    const ds = db.newDataSource({ migrations: idempotencyMigrations });
    await ds.initialize();
    await ds.runMigrations();
    await ds.query('CREATE SCHEMA billing');
    for (const statement of idempotencySchema('billing.idem_keys')) await ds.query(statement);
    await ds.destroy();
  });
  afterAll(async () => db?.drop());

  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
    close = undefined;
  });

  it('forRootAsync takes the DataSource of @nestjs/typeorm by injection', async () => {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url }),
        IdempotencyModule.forRootAsync({
          inject: [DataSource],
          useFactory: (dataSource: DataSource) => ({ dataSource }),
        }),
      ],
      controllers: [TransfersController],
    })
    class AppModule {}
    const { app, url } = await listenApp(AppModule);
    close = () => app.close();
    const k = randomUUID();
    const first = await send(url, '/transfers', { key: k, body: { amount: 1 } });
    const again = await send(url, '/transfers', { key: k, body: { amount: 1 } });
    expect(again.body.equals(first.body)).toBe(true);
    expect(again.headers['idempotent-replayed']).toBe('true');
  });

  it('isGlobal: false serves the module that imports it and the modules it re-exports it to, only those', async () => {
    @Module({
      imports: [IdempotencyModule.forRoot({ isGlobal: false, dataSource: db.newDataSource() })],
      exports: [IdempotencyModule],
    })
    class SharedIdempotencyModule {}
    @Module({ imports: [SharedIdempotencyModule], controllers: [TransfersController] })
    class TransfersModule {}
    @Module({ imports: [TransfersModule] })
    class AppModule {}
    const { app, url } = await listenApp(AppModule);
    close = () => app.close();
    const k = randomUUID();
    const first = await send(url, '/transfers', { key: k, body: { amount: 1 } });
    const again = await send(url, '/transfers', { key: k, body: { amount: 1 } });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.equals(first.body)).toBe(true);

    // A controller in a module that does not import it cannot build the interceptor.
    @Module({ controllers: [TransfersController] })
    class ElsewhereModule {}
    @Module({ imports: [SharedIdempotencyModule, ElsewhereModule] })
    class WrongModule {}
    await expect(
      NestFactory.create(WrongModule, { logger: false, abortOnError: false }),
    ).rejects.toThrow(/IdempotencyInterceptor/);
  });

  it('initializes a DataSource that is not yet, and honours headerName, tableName and mismatchStatus 422', async () => {
    const dataSource = db.newDataSource();
    expect(dataSource.isInitialized).toBe(false);
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource,
          headerName: 'X-Request-Key',
          tableName: 'billing.idem_keys',
          mismatchStatus: 422,
        }),
      ],
      controllers: [TransfersController],
    })
    class AppModule {}
    const { app, url } = await listenApp(AppModule);
    close = () => app.close();
    expect(dataSource.isInitialized).toBe(true);
    const k = randomUUID();
    const before = runs;
    await send(url, '/transfers', { headers: [['X-Request-Key', k]], body: { amount: 1 } });
    await send(url, '/transfers', { headers: [['X-Request-Key', k]], body: { amount: 1 } });
    expect(runs).toBe(before + 1);
    const mismatch = await send(url, '/transfers', {
      headers: [['X-Request-Key', k]],
      body: { amount: 2 },
    });
    expect(mismatch.status).toBe(422);
    expect(mismatch.json().code).toBe('idempotency_key_reused_with_different_params');
    expect(
      await dataSource.query(
        'SELECT count(*)::int AS n FROM billing.idem_keys WHERE idempotency_key = $1',
        [k],
      ),
    ).toEqual([{ n: 1 }]);
    // The default header name means nothing here.
    await send(url, '/transfers', { key: k, body: { amount: 1 } });
    expect(runs).toBe(before + 2);
  });

  it('fails closed with 503 when PostgreSQL is unreachable, never running the handler, and recovers', async () => {
    const proxy = TcpProxy.forUrl(db.url);
    await proxy.start();
    const dataSource = new DataSource({
      type: 'postgres',
      url: proxy.wrap(db.url),
      connectTimeoutMS: 1000,
    });
    @Module({
      imports: [IdempotencyModule.forRoot({ dataSource })],
      controllers: [TransfersController],
    })
    class AppModule {}
    const { app, url } = await listenApp(AppModule);
    close = async () => {
      await app.close();
      // The module opened this DataSource, so closing the app closed it.
      expect(dataSource.isInitialized).toBe(false);
      await proxy.stop();
    };
    await proxy.cut();
    const before = runs;
    const k = randomUUID();
    const down = await send(url, '/transfers', { key: k, body: { amount: 1 } });
    expect(down.status).toBe(503);
    expect(down.headers['content-type']).toContain('application/problem+json');
    expect(down.headers['retry-after']).toBeDefined();
    expect(down.json()).toMatchObject({ status: 503, code: 'idempotency_store_unavailable' });
    expect(runs).toBe(before);

    await proxy.restore();
    const up = await send(url, '/transfers', { key: k, body: { amount: 1 } });
    expect(up.status).toBe(201);
    expect(runs).toBe(before + 1);
  });
});
