import { Injectable } from '@nestjs/common';
import { apiError, notFound } from './api-errors.js';
import { CardProcessor } from './card-processor.service.js';
import { newId } from './ids.js';
import { Ledger, type Payment, type Refund } from './ledger.js';
import type { CreatePaymentDto } from './payments.dto.js';

/**
 * Writes take the caller's `Ledger`: under `@Idempotent({ transactional: true })` that is
 * `idem.manager`, on the transaction that also completes the idempotency record. Reads use the
 * injected one, outside any transaction.
 */
@Injectable()
export class PaymentsService {
  constructor(
    private readonly processor: CardProcessor,
    private readonly ledger: Ledger,
  ) {}

  /**
   * Authorizes with the processor and records the outcome, approved or declined. `processorKey`
   * is the processor's idempotency key: the same on every run of one request, so a run repeated
   * after a crash is not charged twice.
   */
  async charge(
    tx: Ledger,
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
    return tx.insertPayment({
      id: newId('pay'),
      userId,
      amount: dto.amount,
      currency: dto.currency.toLowerCase(),
      source: dto.source,
      status: result.outcome === 'approved' ? 'succeeded' : 'declined',
      amountRefunded: 0,
      failureCode: result.outcome === 'declined' ? result.code : null,
    });
  }

  /**
   * Refunds part or all of a payment. The payment row stays locked until the handler's
   * transaction commits, so concurrent refunds cannot overshoot.
   */
  async refund(tx: Ledger, userId: string, paymentId: string, amount: number): Promise<Refund> {
    const payment = await tx.lockPayment(paymentId, userId);
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
    const refund = await tx.insertRefund({ id: newId('re'), paymentId, userId, amount });
    const refunded = payment.amountRefunded + amount;
    await tx.setRefunded(
      paymentId,
      refunded,
      refunded === payment.amount ? 'refunded' : 'partially_refunded',
    );
    return refund;
  }

  list(userId: string, limit: number): Promise<Payment[]> {
    return this.ledger.listPayments(userId, limit);
  }

  async get(userId: string, id: string): Promise<{ payment: Payment; refunds: Refund[] }> {
    const payment = await this.ledger.findPayment(id, userId);
    if (!payment) throw notFound('payment', id);
    return { payment, refunds: await this.ledger.refundsOf(id) };
  }

  async getRefund(userId: string, id: string): Promise<Refund> {
    const refund = await this.ledger.findRefund(id, userId);
    if (!refund) throw notFound('refund', id);
    return refund;
  }
}
