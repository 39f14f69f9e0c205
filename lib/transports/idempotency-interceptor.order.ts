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
    for (const { cls, routes } of controllerRoutes(modules)) {
      for (const { name, handler } of routes) {
        if (!innermost(handler)) outermostAlone(cls, name, handler);
      }
    }
  }
}

/** Moves the route's own idempotency interceptor innermost; false when it has none. */
function innermost(method: object): boolean {
  const onMethod: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, method) ?? [];
  const idempotency = onMethod.find(isIdempotency);
  if (!idempotency) return false;
  Reflect.defineMetadata(
    INTERCEPTORS_METADATA,
    [...onMethod.filter((i) => !isIdempotency(i)), idempotency],
    method,
  );
  return true;
}

/**
 * A route only the class's attachment covers (declared by a subclass of the `@Idempotent()`
 * class) is handled where Nest runs the class's
 * interceptors: an interceptor after it would run inside the claim, so a `retry()` there would
 * call the handler again unprotected and a `FileInterceptor` would parse the upload after the
 * fingerprint. Refused at start-up instead.
 */
function outermostAlone(cls: object, name: string, method: object): void {
  const onClass: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, cls) ?? [];
  const at = onClass.findIndex(isIdempotency);
  if (at < 0) return;
  const onMethod: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, method) ?? [];
  const inside = [...onClass.slice(at + 1), ...onMethod];
  if (inside.length === 0) return;
  const names = inside.map((i) => (i as { name?: string }).name ?? String(i)).join(', ');
  const controller = (cls as { name: string }).name;
  throw new Error(
    `nestjs-pg-idempotency: ${controller}.${name} is declared by a subclass of the class that carries @Idempotent(), which reaches it only from the class, outside its interceptors (${names}); put @Idempotent() on the class that declares the route, or on the method`,
  );
}
