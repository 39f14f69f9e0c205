import { INTERCEPTORS_METADATA } from '@nestjs/common/constants.js';
import { Injectable, type NestInterceptor } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { IDEMPOTENT_METADATA } from '../idempotency-internal.constants.js';
import { type ControllerRoutes, controllerRoutes } from '../idempotent-routes.scan.js';
import {
  isIdempotencyInterceptor as isIdempotency,
  placedOnMethods,
} from './idempotency.interceptor.js';
import { classPlacement } from './class-idempotency.placement.js';

/**
 * Makes the idempotency interceptor the innermost interceptor of every HTTP route that has it, so
 * whatever the decorator order (or `@Idempotent()` on the class, whose interceptors Nest runs
 * before the method's), the route's other interceptors have run before the fingerprint is taken:
 * `FileInterceptor` has parsed the upload, for instance. A class-level attachment stays on the
 * class, where message and event handlers meet it outside their own interceptors (a
 * `ClassSerializerInterceptor` on the method then shapes the value stored), as resolvers do; on
 * an HTTP route it steps aside for the method's own (`ClassIdempotencyInterceptor`), or for its
 * placement there (`classPlacement`), made for this app and replacing an earlier app's. Nest
 * reads interceptor metadata when it maps routes (`app.init()`), after every provider was built,
 * so a provider's constructor is the last moment to reorder it. Reordering twice changes nothing.
 */
@Injectable()
export class IdempotencyInterceptorOrder {
  constructor(modules: ModulesContainer) {
    for (const controller of controllerRoutes(modules)) innermost(controller);
  }
}

function innermost({ cls, routes, moduleRef }: ControllerRoutes): void {
  const onClass: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, cls) ?? [];
  const classIdempotent =
    onClass.some(isIdempotency) || Reflect.getMetadata(IDEMPOTENT_METADATA, cls) !== undefined;
  let placement: NestInterceptor | undefined;
  for (const { handler: method } of routes) {
    const metadata: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, method) ?? [];
    // An earlier app's placement (another forRoot()'s, in this app) is not this app's.
    const onMethod = metadata.filter((i) => !(typeof i === 'object' && placedOnMethods.has(i!)));
    const own = onMethod.find(isIdempotency);
    if (!own && !classIdempotent) continue;
    const idempotency = own ?? (placement ??= classPlacement(moduleRef));
    Reflect.defineMetadata(
      INTERCEPTORS_METADATA,
      [...onMethod.filter((i) => !isIdempotency(i)), idempotency],
      method,
    );
  }
}
