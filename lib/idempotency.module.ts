import { Module } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { IDEMPOTENCY_STORE } from './idempotency.constants.js';
import { IDEMPOTENCY_RESOLVED_OPTIONS } from './idempotency-internal.constants.js';
import type { ResolvedIdempotencyOptions } from './idempotency.defaults.js';
import { resolveIdempotencyOptions } from './idempotency-options.resolve.js';
import { IdempotencyInterceptor } from './transports/idempotency.interceptor.js';
import { ClassIdempotencyInterceptor } from './transports/class-idempotency.interceptor.js';
import { MethodIdempotencyInterceptor } from './transports/method-idempotency.interceptor.js';
import { IdempotencyInterceptorOrder } from './transports/idempotency-interceptor.order.js';
import {
  ConfigurableIdempotencyModule,
  IDEMPOTENCY_MODULE_OPTIONS,
} from './idempotency.module-definition.js';
import { IdempotencyCleanupService } from './store/idempotency-cleanup.service.js';
import type { IdempotencyModuleOptions } from './interfaces/idempotency-module-options.interface.js';
import { PostgresIdempotencyStore } from './store/postgres/postgres-idempotency.store.js';
import { ReplayAuditService } from './execution/replay-audit.service.js';
import { ReplayCache } from './execution/replay-cache.js';
import { IdempotencyShutdown } from './execution/idempotency-shutdown.service.js';
import { invalidatedReplayCache } from './execution/replay-cache.invalidation.js';
import type { IdempotencyStore } from './interfaces/idempotency-store.interface.js';
import { PreEncodingCapture } from './transports/http/pre-encoding-capture.js';
import type { IdempotencyPool } from './interfaces/idempotency-pool.interface.js';
import { SchemaCheckService } from './store/postgres/schema-check.service.js';
import { TransactionalRoutesCheck } from './execution/transactional-routes.check.js';
import { SseRoutesCheck } from './transports/http/sse-routes.check.js';
import { EventScopesCheck } from './transports/value/event-scopes.check.js';
import { loadTelemetryApi } from './telemetry/idempotency.telemetry.js';
import { useForModule } from './store/module-owned-data-source.js';

/**
 * Registers the idempotency interceptor for every route that carries `@Idempotent()`.
 * @example
 * IdempotencyModule.forRoot({ pool }) // the app's own pg.Pool
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
        await loadTelemetryApi();
        // A custom store brings its own storage: the DataSource is not the module's business then.
        if (!resolved.store && resolved.dataSource) await useForModule(resolved.dataSource);
        return resolved;
      },
    },
    {
      provide: IDEMPOTENCY_STORE,
      inject: [IDEMPOTENCY_RESOLVED_OPTIONS],
      useFactory: (options: ResolvedIdempotencyOptions) =>
        options.store ??
        new PostgresIdempotencyStore<unknown>(
          (options.pool ?? options.dataSource) as IdempotencyPool | DataSource,
          options.tableName,
          {
            cipher: options.encryption,
            statementTimeoutMs: options.statementTimeoutMs,
            preparedStatements: options.preparedStatements,
            singleCommitMaxSeconds: options.singleCommitMaxSeconds,
            transactions: options.transactions,
          },
        ),
    },
    SchemaCheckService,
    TransactionalRoutesCheck,
    SseRoutesCheck,
    EventScopesCheck,
    IdempotencyCleanupService,
    ReplayAuditService,
    IdempotencyShutdown,
    PreEncodingCapture,
    {
      provide: ReplayCache,
      inject: [IDEMPOTENCY_RESOLVED_OPTIONS, IDEMPOTENCY_STORE],
      useFactory: (options: ResolvedIdempotencyOptions, store: IdempotencyStore) =>
        invalidatedReplayCache(options.replayCache, store),
    },
    IdempotencyInterceptor,
    ClassIdempotencyInterceptor,
    MethodIdempotencyInterceptor,
    IdempotencyInterceptorOrder,
  ],
  exports: [
    IDEMPOTENCY_RESOLVED_OPTIONS,
    IDEMPOTENCY_STORE,
    IdempotencyCleanupService,
    ReplayAuditService,
    ReplayCache,
    IdempotencyInterceptor,
    ClassIdempotencyInterceptor,
    MethodIdempotencyInterceptor,
  ],
})
export class IdempotencyModule extends ConfigurableIdempotencyModule {}
