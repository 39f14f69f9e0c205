import { describe, expect, it } from '@jest/globals';
import type { Kysely } from 'kysely';
import { kyselyTransactions } from '../../../lib/adapters/kysely.transactions.js';
import { describeAdapterContract } from './adapter-contract.js';
import { adapterFixture, inTransaction } from './adapter-fixture.js';

interface Database {
  notes: { id: string; body: string };
}

describeAdapterContract<Kysely<Database>>('kysely', async () => ({
  bind: (client) => kyselyTransactions<Database>().bind(client),
  async insert(db, id) {
    await db.insertInto('notes').values({ id, body: 'kysely' }).execute();
  },
  async ids(db) {
    const rows = await db.selectFrom('notes').select('id').orderBy('id').execute();
    return rows.map((r) => r.id);
  },
  nested: (db, work) => db.transaction().execute((trx) => work(trx)),
  nesting: 'savepoint',
}));

describe('kysely transaction settings on the handle', () => {
  it('refuses an isolation level, which a savepoint cannot take', async () => {
    const fx = await adapterFixture('kysely_settings');
    try {
      await inTransaction(fx.pool, 'ROLLBACK', async (client) => {
        const db = kyselyTransactions<Database>().bind(client);
        const serializable = db.transaction().setIsolationLevel('serializable');
        await expect(serializable.execute(() => Promise.resolve())).rejects.toThrow(
          /savepoint: it cannot set an isolation level/,
        );
        expect(await db.selectFrom('notes').select('id').execute()).toEqual([]);
      });
    } finally {
      await fx.close();
    }
  });
});
