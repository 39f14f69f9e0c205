import { INTERCEPTORS_METADATA } from '@nestjs/common/constants.js';
import { Injectable } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { IDEMPOTENT_METADATA } from '../idempotency-internal.constants.js';
import { controllerRoutes } from '../idempotent-routes.scan.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';

const isIdempotency = (i: unknown) =>
  i === IdempotencyInterceptor || i instanceof IdempotencyInterceptor;

/**
 * Makes the idempotency interceptor the innermost interceptor of every route that has it, so
 * whatever the decorator order (or `@Idempotent()` on the class, whose interceptors Nest runs
 * before the method's), the route's other interceptors have run before the fingerprint is taken:
 * `FileInterceptor` has parsed the upload, for instance. Nest reads interceptor metadata when it
 * maps routes (`app.init()`), after every provider was built, so a provider's constructor is the
 * last moment to reorder it. Reordering twice changes nothing.
 */
@Injectable()
export class IdempotencyInterceptorOrder {
  constructor(modules: ModulesContainer) {
    for (const { cls, routes } of controllerRoutes(modules)) innermost(cls, routes);
  }
}

function innermost(cls: object, routes: { handler: object }[]): void {
  const onClass: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, cls) ?? [];
  const classIdempotent =
    onClass.some(isIdempotency) || Reflect.getMetadata(IDEMPOTENT_METADATA, cls) !== undefined;
  if (onClass.some(isIdempotency)) {
    Reflect.defineMetadata(
      INTERCEPTORS_METADATA,
      onClass.filter((i) => !isIdempotency(i)),
      cls,
    );
  }
  for (const { handler: method } of routes) {
    const onMethod: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, method) ?? [];
    const idempotency = onMethod.find(isIdempotency) ?? (classIdempotent && IdempotencyInterceptor);
    if (!idempotency) continue;
    Reflect.defineMetadata(
      INTERCEPTORS_METADATA,
      [...onMethod.filter((i) => !isIdempotency(i)), idempotency],
      method,
    );
  }
}
