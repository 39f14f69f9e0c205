import { INTERCEPTORS_METADATA } from '@nestjs/common/constants.js';
import { Injectable } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { controllerRoutes } from '../idempotent-routes.scan.js';
import { isIdempotencyInterceptor as isIdempotency } from './idempotency.interceptor.js';

/**
 * Makes the idempotency interceptor the innermost interceptor of every HTTP route that has it, so
 * whatever the decorator order (or `@Idempotent()` on the class, whose interceptors Nest runs
 * before the method's), the route's other interceptors have run before the fingerprint is taken:
 * `FileInterceptor` has parsed the upload, for instance. A class-level `@Idempotent()` puts its
 * route's interceptor on each HTTP route (`MethodIdempotencyInterceptor`) and keeps its own
 * attachment on the class, where message and event handlers meet it outside their own
 * interceptors (a `ClassSerializerInterceptor` on the method then shapes the value stored), as
 * resolvers do, and where it steps aside for a route's (`ClassIdempotencyInterceptor`). Only
 * classes are moved: Nest resolves each in the controller's module, in each app. Nest reads
 * interceptor metadata when it maps routes (`app.init()`), after every provider was built, so a
 * provider's constructor is the last moment to reorder it. Reordering twice changes nothing.
 */
@Injectable()
export class IdempotencyInterceptorOrder {
  constructor(modules: ModulesContainer) {
    for (const { routes } of controllerRoutes(modules)) {
      for (const { handler } of routes) innermost(handler);
    }
  }
}

function innermost(method: object): void {
  const onMethod: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, method) ?? [];
  const idempotency = onMethod.find(isIdempotency);
  if (!idempotency) return;
  Reflect.defineMetadata(
    INTERCEPTORS_METADATA,
    [...onMethod.filter((i) => !isIdempotency(i)), idempotency],
    method,
  );
}
