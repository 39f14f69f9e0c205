import type { DataSource, EntityManager } from 'typeorm';
import type {
  TransactionAdapter,
  TransactionClient,
} from '../../interfaces/transaction-adapter.interface.js';

/** What TypeORM's PostgreSQL runner keeps of the connection it was bound to by hand. */
interface BoundRunner {
  databaseConnection: unknown;
  releaseCallback?: (err?: Error) => void;
  transactionDepth: number;
  isTransactionActive: boolean;
}

const noListeners = { on: () => undefined, removeListener: () => undefined };

/**
 * The handler writes through a TypeORM `EntityManager` of `dataSource` (the default with the
 * `dataSource` option): its runner is bound to the store's connection and marked inside a
 * transaction, so a transaction the handler starts itself (`manager.transaction()`, `save()`)
 * nests as a savepoint.
 * @example
 * IdempotencyModule.forRoot({ pool, transactions: typeormTransactions(dataSource) })
 */
export function typeormTransactions(dataSource: DataSource): TransactionAdapter<EntityManager> {
  return {
    bind(client: TransactionClient) {
      const runner = dataSource.createQueryRunner();
      const bound = runner as unknown as BoundRunner;
      bound.databaseConnection = {
        ...noListeners,
        query: (text: string, values?: unknown[]) => client.query(text, values),
      };
      // The store gives the connection back when the transaction ends.
      bound.releaseCallback = () => undefined;
      bound.transactionDepth = 1;
      bound.isTransactionActive = true;
      return runner.manager;
    },
  };
}
