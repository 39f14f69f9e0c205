import { INTERCEPTORS_METADATA } from '@nestjs/common/constants.js';
import { Injectable } from '@nestjs/common';
import { MetadataScanner, ModulesContainer } from '@nestjs/core';
import {
  IDEMPOTENT_METADATA,
  MICROSERVICE_PATTERN_METADATA,
} from '../idempotency-internal.constants.js';
import { controllerRoutes } from '../idempotent-routes.scan.js';
import {
  IdempotencyInterceptor,
  isIdempotencyInterceptor as isIdempotency,
} from './idempotency.interceptor.js';

/**
 * Makes the idempotency interceptor the innermost interceptor of every HTTP route that has it, so
 * whatever the decorator order (or `@Idempotent()` on the class, whose interceptors Nest runs
 * before the method's), the route's other interceptors have run before the fingerprint is taken:
 * `FileInterceptor` has parsed the upload, for instance. A class-level attachment is taken off the
 * class only when every handler of it is an HTTP route: message and event handlers keep it where
 * Nest runs it, outside their own interceptors (a `ClassSerializerInterceptor` on the method then
 * shapes the value stored), as resolvers do; where such a method has its own `@Idempotent()`, the
 * class's attachment steps aside (`ClassIdempotencyInterceptor`). Nest reads interceptor metadata when it maps routes
 * (`app.init()`), after every provider was built, so a provider's constructor is the last moment
 * to reorder it. Reordering twice changes nothing.
 */
@Injectable()
export class IdempotencyInterceptorOrder {
  // The instance, not the class: Nest resolves an interceptor class only among those it found
  // on the controller when it scanned it, and a class-level `@Idempotent()` put another there.
  constructor(modules: ModulesContainer, interceptor: IdempotencyInterceptor) {
    for (const { cls, routes } of controllerRoutes(modules)) innermost(cls, routes, interceptor);
  }
}

function innermost(
  cls: object,
  routes: { handler: object }[],
  interceptor: IdempotencyInterceptor,
): void {
  const onClass: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, cls) ?? [];
  const classIdempotent =
    onClass.some(isIdempotency) || Reflect.getMetadata(IDEMPOTENT_METADATA, cls) !== undefined;
  if (onClass.some(isIdempotency) && !hasMessageHandlers(cls)) {
    Reflect.defineMetadata(
      INTERCEPTORS_METADATA,
      onClass.filter((i) => !isIdempotency(i)),
      cls,
    );
  }
  for (const { handler: method } of routes) {
    const onMethod: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, method) ?? [];
    const idempotency = onMethod.find(isIdempotency) ?? (classIdempotent && interceptor);
    if (!idempotency) continue;
    Reflect.defineMetadata(
      INTERCEPTORS_METADATA,
      [...onMethod.filter((i) => !isIdempotency(i)), idempotency],
      method,
    );
  }
}

function hasMessageHandlers(cls: object): boolean {
  const proto = (cls as { prototype?: Record<string, object> }).prototype;
  if (!proto) return false;
  return new MetadataScanner()
    .getAllMethodNames(proto)
    .some((name) => Reflect.getMetadata(MICROSERVICE_PATTERN_METADATA, proto[name]) !== undefined);
}
