import {
  prismaTransactions,
  type PrismaTransactionClient,
} from '../../../lib/adapters/prisma.transactions.js';
import { PrismaClient } from '../../fixtures/prisma/generated/client.js';
import { describeAdapterContract } from './adapter-contract.js';

type Tx = PrismaTransactionClient<PrismaClient>;

describeAdapterContract<Tx>('prisma', {
  bind: (client) => prismaTransactions((adapter) => new PrismaClient({ adapter })).bind(client),
  async insert(tx, id) {
    await tx.note.create({ data: { id, body: 'prisma' } });
  },
  async ids(tx) {
    const rows = await tx.note.findMany({ orderBy: { id: 'asc' } });
    return rows.map((r) => r.id);
  },
  nested: (tx, work) => tx.$transaction((inner) => work(inner)),
  isolated: (tx, work) => tx.$transaction(work, { isolationLevel: 'Serializable' }),
});
