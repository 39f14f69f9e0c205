// Plain pg: the handler writes through the store's connection, pg's `query(text, values)`.
import { pgTransactions, type TransactionClient } from 'nestjs-pg-idempotency';
import type { Payment } from './payment.js';

export const transactions = pgTransactions();
export type Manager = TransactionClient;

export async function writePayment(manager: Manager, payment: Payment): Promise<Payment> {
  const { rows } = await manager.query<Payment>(
    'INSERT INTO payments (id, amount) VALUES ($1, $2) RETURNING id, amount',
    [payment.id, payment.amount],
  );
  return rows[0];
}
