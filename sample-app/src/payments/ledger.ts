export type PaymentStatus = 'succeeded' | 'declined' | 'partially_refunded' | 'refunded';

/** A row of `payments`. Amounts are in minor units (cents). */
export interface Payment {
  /** `pay_<random>` */
  id: string;
  userId: string;
  amount: number;
  currency: string;
  source: string;
  status: PaymentStatus;
  amountRefunded: number;
  failureCode: string | null;
  createdAt: Date;
}

/** A row of `refunds`. */
export interface Refund {
  /** `re_<random>` */
  id: string;
  paymentId: string;
  userId: string;
  amount: number;
  createdAt: Date;
}

/**
 * The sample's data access: everything that differs between plain `pg` (`pg/pg-ledger.ts`, the
 * default) and TypeORM (`typeorm/typeorm-ledger.ts`). Under `@Idempotent({ transactional: true })`
 * the handler's `idem.manager` is a `Ledger` on the transaction that also completes the
 * idempotency record (the module's `transactions` option builds it); the one injected into
 * `PaymentsService` reads outside any transaction.
 */
export abstract class Ledger {
  /** Inserts the payment; `createdAt` comes from the database. */
  abstract insertPayment(payment: Omit<Payment, 'createdAt'>): Promise<Payment>;
  /** The user's payment, locked (`FOR UPDATE`) until the transaction ends; null if none. */
  abstract lockPayment(id: string, userId: string): Promise<Payment | null>;
  abstract setRefunded(id: string, amountRefunded: number, status: PaymentStatus): Promise<void>;
  abstract insertRefund(refund: Omit<Refund, 'createdAt'>): Promise<Refund>;
  /** The user's newest payments first. */
  abstract listPayments(userId: string, limit: number): Promise<Payment[]>;
  abstract findPayment(id: string, userId: string): Promise<Payment | null>;
  /** Oldest first. */
  abstract refundsOf(paymentId: string): Promise<Refund[]>;
  abstract findRefund(id: string, userId: string): Promise<Refund | null>;
}
