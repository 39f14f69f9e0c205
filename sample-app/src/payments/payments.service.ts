import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { apiError, notFound } from './api-errors.js';
import { CardProcessor } from './card-processor.service.js';
import { newId } from './ids.js';
import { Payment } from './payment.entity.js';
import type { CreatePaymentDto } from './payments.dto.js';
import { Refund } from './refund.entity.js';

/**
 * Ledger writes take the caller's `EntityManager`: under `@Idempotent({ transactional: true })`
 * that is the manager of the transaction that also completes the idempotency record.
 */
@Injectable()
export class PaymentsService {
  constructor(
    private readonly processor: CardProcessor,
    private readonly dataSource: DataSource,
  ) {}

  /**
   * Authorizes with the processor and records the outcome, approved or declined. `processorKey`
   * is the processor's idempotency key: the same on every run of one request, so a run repeated
   * after a crash is not charged twice.
   */
  async charge(
    manager: EntityManager,
    userId: string,
    dto: CreatePaymentDto,
    processorKey: string,
  ): Promise<Payment> {
    const result = await this.processor.authorize(
      processorKey,
      dto.source,
      dto.amount,
      dto.currency,
    );
    const payment = manager.create(Payment, {
      id: newId('pay'),
      userId,
      amount: dto.amount,
      currency: dto.currency.toLowerCase(),
      source: dto.source,
      status: result.outcome === 'approved' ? 'succeeded' : 'declined',
      amountRefunded: 0,
      failureCode: result.outcome === 'declined' ? result.code : null,
    });
    await manager.insert(Payment, payment); // fills createdAt from the database (RETURNING)
    return payment;
  }

  /** Refunds part or all of a payment; the payment row is locked so refunds cannot overshoot. */
  refund(
    manager: EntityManager,
    userId: string,
    paymentId: string,
    amount: number,
  ): Promise<Refund> {
    // A nested transaction becomes a savepoint when `manager` is already transactional.
    return manager.transaction(async (tx) => {
      const payment = await tx.findOne(Payment, {
        where: { id: paymentId, userId },
        lock: { mode: 'pessimistic_write' },
      });
      if (!payment) throw notFound('payment', paymentId);
      if (payment.status === 'declined') {
        throw apiError(400, {
          type: 'invalid_request_error',
          code: 'charge_not_refundable',
          message: `Payment ${paymentId} was declined; there is nothing to refund`,
        });
      }
      const remaining = payment.amount - payment.amountRefunded;
      if (amount > remaining) {
        throw apiError(400, {
          type: 'invalid_request_error',
          code: 'amount_too_large',
          message: `Refund amount (${amount}) is greater than the unrefunded amount (${remaining})`,
          param: 'amount',
        });
      }
      const refund = tx.create(Refund, { id: newId('re'), paymentId, userId, amount });
      await tx.insert(Refund, refund);
      const refunded = payment.amountRefunded + amount;
      await tx.update(
        Payment,
        { id: paymentId },
        {
          amountRefunded: refunded,
          status: refunded === payment.amount ? 'refunded' : 'partially_refunded',
        },
      );
      return refund;
    });
  }

  list(userId: string, limit: number): Promise<Payment[]> {
    return this.dataSource.manager.find(Payment, {
      where: { userId },
      order: { createdAt: 'DESC', id: 'DESC' },
      take: limit,
    });
  }

  async get(userId: string, id: string): Promise<{ payment: Payment; refunds: Refund[] }> {
    const payment = await this.dataSource.manager.findOneBy(Payment, { id, userId });
    if (!payment) throw notFound('payment', id);
    const refunds = await this.dataSource.manager.find(Refund, {
      where: { paymentId: id },
      order: { createdAt: 'ASC', id: 'ASC' },
    });
    return { payment, refunds };
  }

  async getRefund(userId: string, id: string): Promise<Refund> {
    const refund = await this.dataSource.manager.findOneBy(Refund, { id, userId });
    if (!refund) throw notFound('refund', id);
    return refund;
  }
}
