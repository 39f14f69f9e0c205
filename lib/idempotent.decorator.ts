import { applyDecorators, SetMetadata, UseInterceptors } from '@nestjs/common';
import { IDEMPOTENT_METADATA } from './idempotency.constants.js';
import { IdempotencyInterceptor } from './idempotency.interceptor.js';
import type { IdempotentOptions } from './interfaces/idempotent-options.interface.js';

/**
 * Makes a route (or every route of a controller) safe to retry with an `Idempotency-Key`.
 * Method options override controller options, which override the module's. The interceptor is
 * attached to decorated routes only, so every other route runs with no overhead at all.
 * @example
 * \@Post('payments')
 * \@Idempotent({ required: true, transactionId: (body: any) => body.id })
 * charge(@Body() dto: ChargeDto) { ... }
 */
export const Idempotent = (options: IdempotentOptions = {}) =>
  applyDecorators(
    SetMetadata(IDEMPOTENT_METADATA, options),
    UseInterceptors(IdempotencyInterceptor),
  );
