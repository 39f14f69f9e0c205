import { INTERCEPTORS_METADATA } from '@nestjs/common/constants.js';
import { Injectable } from '@nestjs/common';
import { MetadataScanner, ModulesContainer } from '@nestjs/core';
import { IDEMPOTENT_METADATA } from '../idempotency-internal.constants.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';

const isIdempotency = (i: unknown) =>
  i === IdempotencyInterceptor || i instanceof IdempotencyInterceptor;

/**
 * Makes the idempotency interceptor the innermost interceptor of every handler that has it, and
 * its only attachment there: whatever the decorator order (or `@Idempotent()` on the class, whose
 * interceptors Nest runs before the method's), the handler's other interceptors have run before
 * the fingerprint is taken (`FileInterceptor` has parsed the upload), and a call that reaches the
 * interceptor while it already handles that call is a second call, never a nested attachment.
 * Every method of a class-level `@Idempotent()` class gets it: HTTP routes, message handlers and
 * resolvers alike (on a method Nest never calls, the metadata is never read). Nest reads
 * interceptor metadata when it maps handlers (`app.init()`, `listen()`, the GraphQL module's
 * start), after every provider was built, so a provider's constructor is the last moment to
 * reorder it. Reordering twice changes nothing.
 */
@Injectable()
export class IdempotencyInterceptorOrder {
  constructor(modules: ModulesContainer) {
    const scanner = new MetadataScanner();
    const seen = new Set<object>();
    for (const moduleRef of modules.values()) {
      for (const wrapper of [...moduleRef.controllers.values(), ...moduleRef.providers.values()]) {
        const cls = wrapper.metatype;
        if (typeof cls !== 'function' || seen.has(cls)) continue;
        seen.add(cls);
        const proto = cls.prototype as Record<string, object> | undefined;
        if (!proto) continue;
        innermost(
          cls,
          scanner.getAllMethodNames(proto).map((name) => proto[name]),
        );
      }
    }
  }
}

function innermost(cls: object, methods: object[]): void {
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
  for (const method of methods) {
    if (typeof method !== 'function') continue;
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
