import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { IdempotencyTransaction } from '../idempotency-store.interface.js';
import { type PoolClient, type QueryConfig, type QueryResult, queryWithin } from './pg-deadline.js';
import { pipelineWithin } from './pg-pipeline.js';

const UNIQUE_VIOLATION = '23505';

/** A single-commit transaction: the handler's handle, and the store's way to end it with a write. */
export interface SingleCommit {
  readonly transaction: IdempotencyTransaction<EntityManager>;
  /**
   * Runs `config` and COMMIT in one round trip and ends the transaction either way: the result
   * of `config` once committed; null when it hit a unique violation (a record of the scope was
   * committed meanwhile), the transaction then rolled back. Throws on any other failure.
   */
  commitWith(config: QueryConfig): Promise<QueryResult | null>;
}

/**
 * A transaction begun on `client` (checked out under the store's deadline), handed to the
 * handler as a TypeORM EntityManager: the runner is bound to that connection and marked inside a
 * transaction, so a transaction the handler starts itself nests as a savepoint. Every statement
 * runs under the deadline; whatever ends the transaction gives the connection back to the pool
 * (destroyed when it failed).
 */
export function singleCommitTransaction(
  dataSource: DataSource,
  client: PoolClient,
  timeoutMs: number,
): SingleCommit {
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
  const close = (failed?: Error) => {
    open = false;
    finish(runner, failed);
  };
  const end = async (text: 'COMMIT' | 'ROLLBACK') => {
    if (!open) return;
    try {
      await queryWithin(client, { text, values: [] }, timeoutMs);
      close();
    } catch (err) {
      close(err as Error);
      throw err;
    }
  };
  return {
    transaction: {
      manager: runner.manager,
      get active() {
        return open;
      },
      commit: () => end('COMMIT'),
      rollback: () => end('ROLLBACK'),
    },
    async commitWith(config) {
      if (!open) throw new Error('nestjs-pg-idempotency: the transaction already ended');
      const [write, commit] = await pipelineWithin(
        client,
        [config, { text: 'COMMIT', values: [] }],
        timeoutMs,
      );
      if (commit.status === 'rejected') {
        // A failed COMMIT ends the transaction; a failed connection is not reused.
        close(commit.reason as Error);
        throw write.status === 'rejected' ? write.reason : commit.reason;
      }
      close();
      if (write.status === 'rejected') {
        if ((write.reason as { code?: string }).code === UNIQUE_VIOLATION) return null;
        throw write.reason;
      }
      if ((commit.value as { command?: string }).command !== 'COMMIT') {
        throw new Error('nestjs-pg-idempotency: the transaction did not commit');
      }
      return write.value;
    },
  };
}

function finish(runner: QueryRunner, failed: Error | undefined): void {
  (runner as { isTransactionActive: boolean }).isTransactionActive = false;
  (runner as unknown as { transactionDepth: number }).transactionDepth = 0;
  (runner as unknown as { releasePostgresConnection(err?: Error): void }).releasePostgresConnection(
    failed,
  );
}
