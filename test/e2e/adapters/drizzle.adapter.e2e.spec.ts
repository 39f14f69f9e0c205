import { asc } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { pgTable, text } from 'drizzle-orm/pg-core';
import {
  drizzleTransactions,
  type DrizzleTransaction,
} from '../../../lib/adapters/drizzle.transactions.js';
import { describeAdapterContract } from './adapter-contract.js';
import { describeModuleContract } from './module-contract.js';

const notes = pgTable('notes', { id: text().primaryKey(), body: text().notNull() });
const schema = { notes };
type Tx = DrizzleTransaction<typeof schema>;

const transactions = () => drizzleTransactions((client) => drizzle(client, { schema }));
const insert = async (tx: Tx, id: string) => {
  await tx.insert(notes).values({ id, body: 'drizzle' });
};

describeAdapterContract<Tx>('drizzle', {
  bind: (client) => transactions().bind(client),
  insert,
  async ids(tx) {
    const rows = await tx.query.notes.findMany({ orderBy: [asc(notes.id)] });
    return rows.map((r) => r.id);
  },
  nested: (tx, work) => tx.transaction((inner) => work(inner)),
});

describeModuleContract<Tx>('drizzle', { transactions, insert });
