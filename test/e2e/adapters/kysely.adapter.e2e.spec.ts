import type { Kysely } from 'kysely';
import { kyselyTransactions } from '../../../lib/adapters/kysely.transactions.js';
import { describeAdapterContract } from './adapter-contract.js';

interface Database {
  notes: { id: string; body: string };
}

describeAdapterContract<Kysely<Database>>('kysely', {
  bind: (client) => kyselyTransactions<Database>().bind(client),
  async insert(db, id) {
    await db.insertInto('notes').values({ id, body: 'kysely' }).execute();
  },
  async ids(db) {
    const rows = await db.selectFrom('notes').select('id').orderBy('id').execute();
    return rows.map((r) => r.id);
  },
  nested: (db, work) => db.transaction().execute((trx) => work(trx)),
  isolated: (db, work) => db.transaction().setIsolationLevel('serializable').execute(work),
});
