import type { Payment, Refund } from './ledger.js';

/** The JSON a client sees; also what the idempotency record stores and replays. */
export const paymentView = (p: Payment, refunds?: Refund[]) => ({
  id: p.id,
  object: 'payment' as const,
  amount: p.amount,
  amount_refunded: p.amountRefunded,
  currency: p.currency,
  source: p.source,
  status: p.status,
  failure_code: p.failureCode,
  created_at: p.createdAt.toISOString(),
  ...(refunds && { refunds: refunds.map(refundView) }),
});

export const refundView = (r: Refund) => ({
  id: r.id,
  object: 'refund' as const,
  payment: r.paymentId,
  amount: r.amount,
  created_at: r.createdAt.toISOString(),
});
