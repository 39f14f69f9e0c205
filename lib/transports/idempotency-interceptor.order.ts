import { GUARDS_METADATA, INTERCEPTORS_METADATA } from '@nestjs/common/constants.js';
import { Injectable } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { controllerRoutes } from '../idempotent-routes.scan.js';
import { isIdempotencyInterceptor as isIdempotency } from './idempotency.interceptor.js';
import { MethodIdempotencyInterceptor } from './method-idempotency.interceptor.js';

/**
 * Makes the idempotency interceptor the innermost interceptor of every HTTP route that has it, so
 * whatever the decorator order (or `@Idempotent()` on the class, whose interceptors Nest runs
 * before the method's), the route's other interceptors have run before the fingerprint is taken:
 * `FileInterceptor` has parsed the upload, for instance. A route of a class-level `@Idempotent()`
 * (its own, inherited, or declared by a subclass) gets `MethodIdempotencyInterceptor`, which Nest
 * found among the controller's guards when it scanned it, so it resolves it in the controller's
 * module, in each app. The class keeps its own attachment, where message and event handlers meet
 * it outside their own interceptors (a `ClassSerializerInterceptor` on the method then shapes the
 * value stored), as resolvers do, and where it steps aside for a route's. Only classes are moved
 * or added, never instances. Nest reads interceptor metadata when it maps routes (`app.init()`),
 * after every provider was built, so a provider's constructor is the last moment to reorder it.
 * Reordering twice changes nothing.
 */
@Injectable()
export class IdempotencyInterceptorOrder {
  constructor(modules: ModulesContainer) {
    for (const { cls, routes } of controllerRoutes(modules)) {
      const registered = (Reflect.getMetadata(GUARDS_METADATA, cls) ?? []) as unknown[];
      const fromClass = registered.includes(MethodIdempotencyInterceptor);
      for (const { name, handler } of routes) {
        if (innermost(handler, fromClass)) continue;
        outermostAlone(cls, name, handler);
      }
    }
  }
}

/**
 * Moves the route's idempotency interceptor innermost, adding the class's when `fromClass` and it
 * has none of its own; false when it has none.
 */
function innermost(method: object, fromClass: boolean): boolean {
  const onMethod: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, method) ?? [];
  const idempotency =
    onMethod.find(isIdempotency) ?? (fromClass ? MethodIdempotencyInterceptor : undefined);
  if (!idempotency) return false;
  Reflect.defineMetadata(
    INTERCEPTORS_METADATA,
    [...onMethod.filter((i) => !isIdempotency(i)), idempotency],
    method,
  );
  return true;
}

/**
 * A route only a class attachment covers that Nest was not given the routes' interceptor with
 * (metadata set by hand, not by `@Idempotent()`) is handled where Nest runs the class's
 * interceptors: one after it would run inside the claim, so a `retry()` there would call the
 * handler again unprotected. Refused at start-up instead.
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
    `nestjs-pg-idempotency: ${controller}.${name} is covered by a class attachment of the idempotency interceptor that runs outside its interceptors (${names}); use @Idempotent() on the class or the method`,
  );
}
