import { type DynamicModule, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { IdempotencyModule, typeormTransactions } from '../../../lib/index.js';
import { idempotencyMigrations } from '../../../migrations/index.js';
import { idempotencySettings, SAMPLE_APPLICATION_NAME } from '../idempotency.settings.js';
import { Ledger } from '../payments/ledger.js';
import type { SampleAppOptions } from '../sample.options.js';
import { sampleMigrations } from './migrations/index.js';
import { PaymentEntity } from './payment.entity.js';
import { RefundEntity } from './refund.entity.js';
import { TypeOrmLedger } from './typeorm-ledger.js';

/**
 * TypeORM (`SAMPLE_ORM=typeorm`): the store runs on the app's DataSource, the migrations run with
 * TypeORM's (`migrationsRun`), and `idem.manager` is a TypeOrmLedger on the transaction's
 * `EntityManager`.
 */
@Module({})
export class TypeOrmDatabaseModule {
  static forRoot(options: SampleAppOptions): DynamicModule {
    return {
      module: TypeOrmDatabaseModule,
      global: true,
      imports: [
        TypeOrmModule.forRootAsync({
          useFactory: () => ({
            type: 'postgres',
            url: options.databaseUrl,
            applicationName: SAMPLE_APPLICATION_NAME,
            entities: [PaymentEntity, RefundEntity],
            migrations: [...idempotencyMigrations, ...sampleMigrations],
            migrationsRun: true,
            synchronize: false,
            logging: options.logSql ? 'all' : ['error', 'migration'],
            retryAttempts: 3,
            retryDelay: 1000,
          }),
        }),
        IdempotencyModule.forRootAsync({
          inject: [DataSource],
          useFactory: (dataSource: DataSource) => {
            const entityManagers = typeormTransactions(dataSource);
            return {
              dataSource,
              transactions: (client) => new TypeOrmLedger(entityManagers.bind(client)),
              ...idempotencySettings(options),
            };
          },
        }),
      ],
      providers: [
        {
          provide: Ledger,
          inject: [DataSource],
          useFactory: (dataSource: DataSource) => new TypeOrmLedger(dataSource.manager),
        },
      ],
      exports: [Ledger],
    };
  }
}
