import { Module } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { IDEMPOTENCY_RESOLVED_OPTIONS, IDEMPOTENCY_STORE } from './idempotency.constants.js';
import { type ResolvedIdempotencyOptions, resolveIdempotencyOptions } from './idempotency.defaults.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import {
  ConfigurableIdempotencyModule,
  IDEMPOTENCY_MODULE_OPTIONS,
} from './idempotency.module-definition.js';
import { IdempotencyCleanupService } from './idempotency-cleanup.service.js';
import type { IdempotencyModuleOptions } from './interfaces/idempotency-module-options.interface.js';
import { PostgresIdempotencyStore } from './postgres-idempotency.store.js';

/**
 * Registers the idempotency interceptor for every route that carries `@Idempotent()`.
 * @example
 * IdempotencyModule.forRootAsync({ inject: [DataSource], useFactory: (dataSource: DataSource) => ({ dataSource }) })
 */
@Module({
  providers: [
    {
      provide: IDEMPOTENCY_RESOLVED_OPTIONS,
      inject: [IDEMPOTENCY_MODULE_OPTIONS],
      useFactory: async (options: IdempotencyModuleOptions) => {
        const resolved = resolveIdempotencyOptions(options);
        if (!resolved.dataSource.isInitialized) await resolved.dataSource.initialize();
        return resolved;
      },
    },
    {
      provide: IDEMPOTENCY_STORE,
      inject: [IDEMPOTENCY_RESOLVED_OPTIONS],
      useFactory: (options: ResolvedIdempotencyOptions) =>
        new PostgresIdempotencyStore(options.dataSource, options.tableName),
    },
    IdempotencyCleanupService,
    { provide: APP_INTERCEPTOR, useClass: IdempotencyInterceptor },
  ],
  exports: [IDEMPOTENCY_RESOLVED_OPTIONS, IDEMPOTENCY_STORE, IdempotencyCleanupService],
})
export class IdempotencyModule extends ConfigurableIdempotencyModule {}
