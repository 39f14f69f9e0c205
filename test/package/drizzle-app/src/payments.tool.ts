// Drizzle (node-postgres): the handler writes through a Drizzle transaction object.
import { drizzle } from 'drizzle-orm/node-postgres';
import { integer, pgTable, text } from 'drizzle-orm/pg-core';
import { drizzleTransactions, type DrizzleTransaction } from 'nestjs-pg-idempotency/drizzle';
import type { Payment } from './payment.js';

const payments = pgTable('payments', { id: text().primaryKey(), amount: integer().notNull() });

export const transactions = drizzleTransactions((client) => drizzle(client));
export type Manager = DrizzleTransaction;

export async function writePayment(manager: Manager, payment: Payment): Promise<Payment> {
  const [row] = await manager.insert(payments).values(payment).returning();
  return row;
}
