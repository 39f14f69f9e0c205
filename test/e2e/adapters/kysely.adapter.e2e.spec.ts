import type { Kysely } from 'kysely';
import { kyselyTransactions } from '../../../lib/adapters/kysely.transactions.js';
import { describeAdapterContract } from './adapter-contract.js';
import { describeModuleContract } from './module-contract.js';

interface Database {
  notes: { id: string; body: string };
}

const transactions = () => kyselyTransactions<Database>();
const insert = async (db: Kysely<Database>, id: string) => {
  await db.insertInto('notes').values({ id, body: 'kysely' }).execute();
};

describeAdapterContract<Kysely<Database>>('kysely', {
  bind: (client) => transactions().bind(client),
  insert,
  async ids(db) {
    const rows = await db.selectFrom('notes').select('id').orderBy('id').execute();
    return rows.map((r) => r.id);
  },
  nested: (db, work) => db.transaction().execute((trx) => work(trx)),
  isolated: (db, work) => db.transaction().setIsolationLevel('serializable').execute(work),
});

describeModuleContract<Kysely<Database>>('kysely', { transactions, insert });
