import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { IdempotencyModule, type IdempotencyModuleOptions } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

/** A misspelt or impossible option stops the app at start-up, both ways of configuring it. */
describe('strict options at start-up', () => {
  let db: MigratedDatabase;
  beforeAll(async () => {
    db = await createMigratedDatabase('strict_opts');
  });
  afterAll(async () => db?.drop());

  const boot = async (module: unknown) => {
    const app = await NestFactory.createApplicationContext(module as never, {
      logger: false,
      abortOnError: false,
    });
    await app.close();
  };

  it('forRoot: an unknown key is named with the valid key it is closest to', async () => {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          ttlSecond: 3600,
        } as IdempotencyModuleOptions),
      ],
    })
    class AppModule {}
    await expect(boot(AppModule)).rejects.toThrow(
      "nestjs-pg-idempotency: unknown option 'ttlSecond' (did you mean 'ttlSeconds'?)",
    );
  });

  it('forRootAsync: what the factory returns is checked too (mismatchStatus: 400)', async () => {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url }),
        IdempotencyModule.forRootAsync({
          inject: [DataSource],
          useFactory: (dataSource: DataSource) =>
            ({ dataSource, mismatchStatus: 400 }) as unknown as IdempotencyModuleOptions,
        }),
      ],
    })
    class AppModule {}
    await expect(boot(AppModule)).rejects.toThrow(
      'nestjs-pg-idempotency: mismatchStatus must be one of 409, 422, got 400',
    );
  });

  it('forRootAsync: isGlobal returned by the factory says where it belongs', async () => {
    @Module({
      imports: [
        IdempotencyModule.forRootAsync({
          useFactory: () =>
            ({ dataSource: db.dataSource, isGlobal: true }) as IdempotencyModuleOptions,
        }),
      ],
    })
    class AppModule {}
    await expect(boot(AppModule)).rejects.toThrow(
      'it goes next to useFactory in forRootAsync({ isGlobal, useFactory })',
    );
  });

  it('boots with valid options', async () => {
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          mismatchStatus: 422,
          cleanup: { enabled: false },
        }),
      ],
    })
    class AppModule {}
    await expect(boot(AppModule)).resolves.toBeUndefined();
  });
});
