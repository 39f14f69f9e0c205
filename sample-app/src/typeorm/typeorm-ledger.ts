import type { EntityManager } from 'typeorm';
import type { Ledger, Payment, PaymentStatus, Refund } from '../payments/ledger.js';
import { PaymentEntity } from './payment.entity.js';
import { RefundEntity } from './refund.entity.js';

/** The ledger through a TypeORM `EntityManager` (the DataSource's, or the handler's transaction's). */
export class TypeOrmLedger implements Ledger {
  constructor(private readonly manager: EntityManager) {}

  async insertPayment(payment: Omit<Payment, 'createdAt'>): Promise<Payment> {
    const entity = this.manager.create(PaymentEntity, payment);
    await this.manager.insert(PaymentEntity, entity); // fills createdAt from the database (RETURNING)
    return entity;
  }

  lockPayment(id: string, userId: string): Promise<Payment | null> {
    return this.manager.findOne(PaymentEntity, {
      where: { id, userId },
      lock: { mode: 'pessimistic_write' },
    });
  }

  async setRefunded(id: string, amountRefunded: number, status: PaymentStatus): Promise<void> {
    await this.manager.update(PaymentEntity, { id }, { amountRefunded, status });
  }

  async insertRefund(refund: Omit<Refund, 'createdAt'>): Promise<Refund> {
    const entity = this.manager.create(RefundEntity, refund);
    await this.manager.insert(RefundEntity, entity);
    return entity;
  }

  listPayments(userId: string, limit: number): Promise<Payment[]> {
    return this.manager.find(PaymentEntity, {
      where: { userId },
      order: { createdAt: 'DESC', id: 'DESC' },
      take: limit,
    });
  }

  findPayment(id: string, userId: string): Promise<Payment | null> {
    return this.manager.findOneBy(PaymentEntity, { id, userId });
  }

  refundsOf(paymentId: string): Promise<Refund[]> {
    return this.manager.find(RefundEntity, {
      where: { paymentId },
      order: { createdAt: 'ASC', id: 'ASC' },
    });
  }

  findRefund(id: string, userId: string): Promise<Refund | null> {
    return this.manager.findOneBy(RefundEntity, { id, userId });
  }
}
