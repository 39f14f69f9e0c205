import {
  type CallHandler,
  type ExecutionContext,
  Inject,
  Injectable,
  Logger,
  type NestInterceptor,
} from '@nestjs/common';
import type { Observable } from 'rxjs';
import { IDEMPOTENCY_STORE } from '../idempotency.constants.js';
import { IDEMPOTENCY_RESOLVED_OPTIONS } from '../idempotency-internal.constants.js';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import { IdempotencyCoordinator } from '../execution/idempotency.coordinator.js';
import { IdempotentRouteResolver } from '../execution/idempotent-route.resolver.js';
import type { IdempotencyStore } from '../interfaces/idempotency-store.interface.js';
import { ReplayAuditService } from '../execution/replay-audit.service.js';
import { ReplayCache } from '../execution/replay-cache.js';
import type { TransportAdapter } from './transport-adapter.interface.js';
import { TRANSPORT_ADAPTERS } from './transport-adapters.js';

/**
 * Hands a call to a route with `@Idempotent()` to the first transport adapter that matches it
 * (HTTP, GraphQL, NATS, RPC); they share one coordinator. Other routes, and calls of a
 * transport no adapter speaks, pass straight through.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly routes: IdempotentRouteResolver;
  private readonly adapters: readonly TransportAdapter[];

  constructor(
    @Inject(IDEMPOTENCY_RESOLVED_OPTIONS) options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_STORE) store: IdempotencyStore,
    audit: ReplayAuditService,
    cache: ReplayCache,
  ) {
    const logger = new Logger('Idempotency');
    this.routes = new IdempotentRouteResolver(options);
    const coordinator = new IdempotencyCoordinator(options, store, audit, cache, logger);
    this.adapters = TRANSPORT_ADAPTERS.map((adapter) => adapter({ options, coordinator, logger }));
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const route = this.routes.resolve(context);
    if (route === null) return next.handle();
    const adapter = this.adapters.find((candidate) => candidate.matches(context));
    return adapter ? adapter.intercept(context, route, next) : next.handle();
  }
}

/** The idempotency interceptor, as a class (or a subclass) or an instance, in interceptor metadata. */
export const isIdempotencyInterceptor = (i: unknown): boolean =>
  i === IdempotencyInterceptor ||
  i instanceof IdempotencyInterceptor ||
  (typeof i === 'function' && i.prototype instanceof IdempotencyInterceptor);
