import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { IdempotencyTransaction } from '../../interfaces/idempotency-store.interface.js';
import { type PoolClient, type QueryConfig, type QueryResult, queryWithin } from './pg-deadline.js';
import { pipelineWithin } from './pg-pipeline.js';
import {
  type SingleCommitLimits,
  abortedError,
  abortTransaction,
  reportingSessionLoss,
  watchSingleCommit,
} from './single-commit-bound.js';

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
 * (destroyed when it failed). Open past `maxSeconds`, or its session lost, it is aborted: nothing
 * of it commits, `transaction.aborted` settles at once, and `rollback()` returns once its locks
 * are gone.
 */
export function singleCommitTransaction(
  dataSource: DataSource,
  client: PoolClient,
  limits: SingleCommitLimits,
): SingleCommit {
  const { timeoutMs } = limits;
  const runner = dataSource.createQueryRunner();
  const bound = runner as unknown as {
    databaseConnection: PoolClient;
    releaseCallback?: (err?: Error) => void;
    transactionDepth: number;
  };
  bound.releaseCallback = (err) => client.release(err);
  bound.transactionDepth = 1;
  (runner as { isTransactionActive: boolean }).isTransactionActive = true;
  let open = true;
  let released = false;
  let abortedBy: Error | undefined;
  let aborted!: (reason: Error) => void;
  /** An aborted transaction being ended: a ROLLBACK or COMMIT asked meanwhile waits for it. */
  let ending: Promise<void> | undefined;
  const close = (failed?: Error) => {
    open = false;
    stopWatching();
    if (released) return;
    released = true;
    finish(runner, failed);
    limits.onEnd();
  };
  const watch = watchSingleCommit(client, limits.maxSeconds * 1000, (cause) => {
    open = false;
    // No statement of the handler may reach the connection from now on: after the ROLLBACK
    // it would run on its own, committed.
    (runner as { isReleased: boolean }).isReleased = true;
    abortedBy = abortedError(cause, limits.maxSeconds);
    ending = abortTransaction(client, cause, limits, close);
    aborted(abortedBy);
  });
  const stopWatching = watch.stop;
  bound.databaseConnection = reportingSessionLoss(client, watch.lost);
  const end = async (text: 'COMMIT' | 'ROLLBACK') => {
    if (!open) {
      await ending;
      if (text === 'COMMIT' && abortedBy) throw abortedBy;
      return;
    }
    stopWatching();
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
      aborted: new Promise<Error>((resolve) => (aborted = resolve)),
    },
    async commitWith(config) {
      if (!open)
        throw abortedBy ?? new Error('nestjs-pg-idempotency: the transaction already ended');
      stopWatching();
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
  const r = runner as unknown as {
    isTransactionActive: boolean;
    transactionDepth: number;
    isReleased: boolean;
    releaseCallback?: (err?: Error) => void;
  };
  r.isTransactionActive = false;
  r.transactionDepth = 0;
  // What TypeORM's release does for a runner bound by hand, even if already fenced (see abort).
  r.isReleased = true;
  const release = r.releaseCallback;
  r.releaseCallback = undefined;
  release?.(failed);
}
