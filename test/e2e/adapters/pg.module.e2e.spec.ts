import { pgTransactions, type TransactionClient } from '../../../lib/index.js';
import { describeModuleContract } from './module-contract.js';

// The reference the other tools are held to: the store's own connection, pg's `query`.
describeModuleContract<TransactionClient>('pg', {
  transactions: () => pgTransactions(),
  async insert(client, id) {
    await client.query('INSERT INTO notes (id, body) VALUES ($1, $2)', [id, 'pg']);
  },
});
