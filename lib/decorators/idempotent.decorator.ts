import { applyDecorators, SetMetadata, UseInterceptors } from '@nestjs/common';
import { INTERCEPTORS_METADATA, PATH_METADATA } from '@nestjs/common/constants.js';
import { MetadataScanner } from '@nestjs/core';
import { IDEMPOTENT_METADATA } from '../idempotency-internal.constants.js';
import {
  IdempotencyInterceptor,
  isIdempotencyInterceptor,
} from '../transports/idempotency.interceptor.js';
import { ClassIdempotencyInterceptor } from '../transports/class-idempotency.interceptor.js';
import { MethodIdempotencyInterceptor } from '../transports/method-idempotency.interceptor.js';
import type { IdempotentOptions } from '../interfaces/idempotent-options.interface.js';
import { checkIdempotentOptions } from './idempotent-options.check.js';

/**
 * Makes a route (or every route of a controller) safe to retry with an `Idempotency-Key`.
 * Method options override controller options, which override the module's. The interceptor is
 * attached to decorated routes only, so every other route runs with no overhead at all.
 * @example
 * \@Post('payments')
 * \@Idempotent({ required: true, transactionId: (body: any) => body.id })
 * charge(@Body() dto: ChargeDto) { ... }
 */
export const Idempotent = (options: IdempotentOptions = {}) => {
  const { storeResponse } = options;
  if (storeResponse !== undefined && storeResponse !== 'full' && storeResponse !== 'digest') {
    // Fails when the controller is loaded: a typo must not quietly keep a body meant to stay out.
    throw new Error(
      `nestjs-pg-idempotency: storeResponse must be 'full' or 'digest', got ${JSON.stringify(storeResponse)}`,
    );
  }
  checkIdempotentOptions(options);
  const metadata = SetMetadata(IDEMPOTENT_METADATA, definedOnly(options));
  const onMethod = applyDecorators(metadata, UseInterceptors(IdempotencyInterceptor));
  // On a class, the class's own attachment: it steps aside for a method's (see its comment).
  const onClass = applyDecorators(metadata, UseInterceptors(ClassIdempotencyInterceptor));
  return ((target: object, key?: string | symbol, descriptor?: PropertyDescriptor) => {
    if (descriptor) return onMethod(target, key, descriptor);
    onClass(target);
    attachToRoutes(target as { prototype: Record<string, unknown> });
  }) as ClassDecorator & MethodDecorator;
};

/**
 * Puts `MethodIdempotencyInterceptor` on each HTTP route of the class without one of its own
 * (route decorators ran before the class's). Nest registers it with the controller's module when
 * it scans it, and resolves it there in every app. An inherited route is its base class's
 * function, which the base and its other subclasses share: there it finds no `@Idempotent()`
 * options and passes calls on, but their modules must see an `IdempotencyModule` (a global one
 * does) for Nest to build it.
 */
function attachToRoutes(cls: { prototype: Record<string, unknown> }): void {
  for (const name of new MetadataScanner().getAllMethodNames(cls.prototype)) {
    const method = cls.prototype[name];
    if (typeof method !== 'function' || !Reflect.hasMetadata(PATH_METADATA, method)) continue;
    const interceptors: unknown[] = Reflect.getMetadata(INTERCEPTORS_METADATA, method) ?? [];
    if (interceptors.some(isIdempotencyInterceptor)) continue;
    Reflect.defineMetadata(
      INTERCEPTORS_METADATA,
      [...interceptors, MethodIdempotencyInterceptor],
      method,
    );
  }
}

/**
 * The options without fields given as `undefined`, so a method's `{ ttlSeconds: env.X }` with
 * `X` unset keeps its controller's value as an unset field does, instead of erasing it (a
 * controller's `required: true` quietly turned off by `{ required: config.strict }`).
 */
function definedOnly(options: IdempotentOptions): IdempotentOptions {
  const defined: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(options))
    if (value !== undefined) defined[name] = value;
  return defined as IdempotentOptions;
}
