import { type DynamicModule, Module, type INestApplication, ValidationPipe } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { IdempotencyModule } from '../../lib/index.js';
import { idempotencyMigrations } from '../../migrations/index.js';
import { BearerAuthGuard } from './auth/bearer-auth.guard.js';
import { sampleMigrations } from './migrations/index.js';
import { Payment } from './payments/payment.entity.js';
import { PaymentsModule } from './payments/payments.module.js';
import { Refund } from './payments/refund.entity.js';
import type { SampleAppOptions } from './sample.options.js';

/** Replayable for 24 h; records are kept 7 more days for reconciliation (see sql/reconciliation). */
export const IDEMPOTENCY_TTL_SECONDS = 24 * 3600;
export const IDEMPOTENCY_RETENTION_SECONDS = 7 * 24 * 3600;

@Module({})
export class AppModule {
  static forRoot(options: SampleAppOptions): DynamicModule {
    return {
      module: AppModule,
      imports: [
        // The library registers its cleanup job through SchedulerRegistry; the app owns the scheduler.
        ScheduleModule.forRoot(),
        TypeOrmModule.forRootAsync({
          useFactory: () => ({
            type: 'postgres',
            url: options.databaseUrl,
            entities: [Payment, Refund],
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
          useFactory: (dataSource: DataSource) => ({
            dataSource,
            getUserId: (req) => req.user?.id,
            ttlSeconds: IDEMPOTENCY_TTL_SECONDS,
            cleanup: { retentionSeconds: IDEMPOTENCY_RETENTION_SECONDS },
            // For ctx.keyFor(): one secret for every instance, kept across deploys (a secret store
            // in production; the fallback is for running the sample locally only).
            derivedKeySecret:
              process.env.IDEMPOTENCY_DERIVED_KEY_SECRET ??
              'sample-app-local-only-derived-key-secret',
            ...options.idempotency,
          }),
        }),
        PaymentsModule.register(options),
      ],
      providers: [{ provide: APP_GUARD, useClass: BearerAuthGuard }],
    };
  }
}

/** App-wide settings shared by main.ts and the e2e test. */
export function configureApp(app: INestApplication): INestApplication {
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true }));
  return app;
}
