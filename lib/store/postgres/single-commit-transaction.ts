import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { IdempotencyTransaction } from '../idempotency-store.interface.js';
import { type PoolClient, queryWithin } from './pg-deadline.js';

/**
 * A transaction begun on `client` (a connection checked out under the store's deadline), handed
 * to the handler as a TypeORM EntityManager: the runner is bound to that connection and marked
 * inside a transaction, so a transaction the handler starts itself nests as a savepoint. COMMIT
 * and ROLLBACK run under the deadline too; either way the connection goes back to the pool
 * (destroyed when it failed).
 */
export function singleCommitTransaction(
  dataSource: DataSource,
  client: PoolClient,
  timeoutMs: number,
): IdempotencyTransaction<EntityManager> {
  const runner = dataSource.createQueryRunner();
  const bound = runner as unknown as {
    databaseConnection: PoolClient;
    releaseCallback?: (err?: Error) => void;
    transactionDepth: number;
  };
  bound.databaseConnection = client;
  bound.releaseCallback = (err) => client.release(err);
  bound.transactionDepth = 1;
  (runner as { isTransactionActive: boolean }).isTransactionActive = true;
  let open = true;
  const end = async (text: 'COMMIT' | 'ROLLBACK') => {
    if (!open) return;
    open = false;
    let failed: Error | undefined;
    try {
      await queryWithin(client, { text, values: [] }, timeoutMs);
    } catch (err) {
      failed = err as Error;
      throw err;
    } finally {
      finish(runner, failed);
    }
  };
  return {
    manager: runner.manager,
    get active() {
      return open;
    },
    commit: () => end('COMMIT'),
    rollback: () => end('ROLLBACK'),
  };
}

function finish(runner: QueryRunner, failed: Error | undefined): void {
  (runner as { isTransactionActive: boolean }).isTransactionActive = false;
  (runner as unknown as { transactionDepth: number }).transactionDepth = 0;
  (runner as unknown as { releasePostgresConnection(err?: Error): void }).releasePostgresConnection(
    failed,
  );
}
