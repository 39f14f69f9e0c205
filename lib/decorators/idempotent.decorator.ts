import { applyDecorators, SetMetadata, UseGuards, UseInterceptors } from '@nestjs/common';
import { IDEMPOTENT_METADATA } from '../idempotency-internal.constants.js';
import { IdempotencyInterceptor } from '../transports/idempotency.interceptor.js';
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
  // On a class, the class's own attachment: it steps aside for a route's (see its comment), and
  // the routes' interceptor, registered for IdempotencyInterceptorOrder as an always-true guard.
  const onClass = applyDecorators(
    metadata,
    UseInterceptors(ClassIdempotencyInterceptor),
    UseGuards(MethodIdempotencyInterceptor),
  );
  return ((target: object, key?: string | symbol, descriptor?: PropertyDescriptor) =>
    descriptor ? onMethod(target, key, descriptor) : onClass(target)) as ClassDecorator &
    MethodDecorator;
};

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
