import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import { getIdempotencyContext } from '../execution/idempotency-context.js';
import { contextCarrier } from '../request/context-carrier.js';

/**
 * Parameter decorator: the handler's `IdempotencyContext` (undefined without a key, except on a
 * transactional GraphQL resolver or RPC handler: a context with key `''` whose `manager` is a plain
 * transaction, committed when the handler returns; nothing is recorded).
 * @example
 * \@Post() @Idempotent()
 * charge(@Body() dto: ChargeDto, @IdempotencyCtx() idem?: IdempotencyContext) {
 *   const charge = this.payments.charge(dto);
 *   idem?.setTransactionId(charge.id);
 *   return charge;
 * }
 */
export const IdempotencyCtx = createParamDecorator((_: unknown, ctx: ExecutionContext) =>
  getIdempotencyContext(contextCarrier(ctx)),
);
