import type { CallHandler, ExecutionContext, Logger } from '@nestjs/common';
import type { Observable } from 'rxjs';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import type { IdempotencyCoordinator } from '../execution/idempotency.coordinator.js';
import type { IdempotentRoute } from '../execution/idempotent-route.resolver.js';

/**
 * One transport's side of `@Idempotent()`: reads the key and the request from its context, asks
 * the coordinator, and says the decision in its own terms (a response, a value, an error).
 * The interceptor hands a call to the first adapter of `TRANSPORT_ADAPTERS` that `matches` it.
 */
export interface TransportAdapter {
  /** Whether this adapter handles the call (its `getType()`, or the shape of its context). */
  matches(context: ExecutionContext): boolean;
  /** A call to a route that carries `@Idempotent()`. */
  intercept(
    context: ExecutionContext,
    route: IdempotentRoute,
    next: CallHandler,
  ): Observable<unknown>;
}

/** What every adapter is built from; one coordinator is shared by all transports. */
export interface TransportDeps {
  options: ResolvedIdempotencyOptions;
  coordinator: IdempotencyCoordinator;
  logger: Logger;
}

/** Builds an adapter once, when the interceptor is created. */
export type TransportAdapterFactory = (deps: TransportDeps) => TransportAdapter;
