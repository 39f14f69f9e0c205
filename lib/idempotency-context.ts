import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { IdempotencyScope } from './interfaces/idempotency-store.interface.js';

const CONTEXT = Symbol('nestjs-pg-idempotency:context');

/** What a handler running under a claimed key can see and set. */
export class IdempotencyContext {
  private txId: string | null = null;

  /**
   * In transactional mode (`@Idempotent({ transactional: true })`), the EntityManager of the one
   * transaction that also completes this record; undefined otherwise.
   */
  manager?: EntityManager;

  constructor(readonly scope: IdempotencyScope) {}

  /** Links the record to the transaction this operation produced (e.g. the charge id). */
  setTransactionId(id: string | number): void {
    this.txId = String(id);
  }

  get transactionId(): string | null {
    return this.txId;
  }
}

export function attachIdempotencyContext(req: object, ctx: IdempotencyContext): void {
  (req as Record<symbol, IdempotencyContext>)[CONTEXT] = ctx;
}

/** The context of the current request, or undefined when it carries no key. */
export function getIdempotencyContext(req: object): IdempotencyContext | undefined {
  return (req as Record<symbol, IdempotencyContext | undefined>)[CONTEXT];
}

/**
 * Parameter decorator: the handler's `IdempotencyContext` (undefined without a key).
 * @example
 * \@Post() @Idempotent()
 * charge(@Body() dto: ChargeDto, @IdempotencyCtx() idem?: IdempotencyContext) {
 *   const charge = this.payments.charge(dto);
 *   idem?.setTransactionId(charge.id);
 *   return charge;
 * }
 */
export const IdempotencyCtx = createParamDecorator((_: unknown, ctx: ExecutionContext) =>
  getIdempotencyContext(ctx.switchToHttp().getRequest()),
);
