// Prisma 7 (@prisma/adapter-pg): the handler writes through the interactive transaction client.
import { prismaTransactions, type PrismaTransactionClient } from 'nestjs-pg-idempotency/prisma';
// Written by `prisma generate` when the test installs the app (see ../prisma/schema.prisma).
import { PrismaClient } from './generated/prisma/client.js';
import type { Payment } from './payment.js';

export const transactions = prismaTransactions((adapter) => new PrismaClient({ adapter }));
export type Manager = PrismaTransactionClient<PrismaClient>;

export function writePayment(manager: Manager, payment: Payment): Promise<Payment> {
  return manager.payment.create({ data: payment });
}
