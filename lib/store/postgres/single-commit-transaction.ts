import type { IdempotencyTransaction } from '../../interfaces/idempotency-store.interface.js';
import type { TransactionClient } from '../../interfaces/transaction-adapter.interface.js';
import { passQuery, TRANSACTION_ENDED } from './lazy-transaction.js';
import { type PoolClient, type QueryConfig, type QueryResult, queryWithin } from './pg-deadline.js';
import { pipelineWithin } from './pg-pipeline.js';
import {
  type SingleCommitLimits,
  abortedError,
  abortTransaction,
  reportingSessionLoss,
  sessionGone,
  watchSingleCommit,
} from './single-commit-bound.js';

const UNIQUE_VIOLATION = '23505';
const ENDED = Promise.resolve();

/** A single-commit transaction: the handler's handle, and the store's way to end it with a write. */
export interface SingleCommit<TManager = unknown> {
  readonly transaction: IdempotencyTransaction<TManager>;
  /** A statement of the store in the transaction, under the deadline. */
  run(config: QueryConfig): Promise<QueryResult>;
  /**
   * Runs `config` and COMMIT in one round trip and ends the transaction either way: the result
   * of `config` once committed; null when it hit a unique violation (a record of the scope was
   * committed meanwhile), the transaction then rolled back. Throws on any other failure.
   */
  commitWith(config: QueryConfig): Promise<QueryResult | null>;
}

/**
 * A transaction begun on `client` (checked out under the store's deadline), handed to the
 * handler through `bind` as a `TransactionClient` on that connection. The store's statements run
 * under the deadline; whatever ends the transaction gives the connection back to the pool
 * (destroyed when it failed). Open past `maxSeconds`, or its session lost, it is aborted: nothing
 * of it commits, no statement of the handler reaches the connection any more,
 * `transaction.aborted` settles at once, and `rollback()` returns once its locks are gone.
 */
export function singleCommitTransaction<TManager>(
  bind: (client: TransactionClient) => TManager,
  client: PoolClient,
  limits: SingleCommitLimits,
): SingleCommit<TManager> {
  const { timeoutMs } = limits;
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
    client.release(failed);
    limits.onEnd();
  };
  const watch = watchSingleCommit(client, limits.maxSeconds * 1000, (cause) => {
    // No statement of the handler may reach the connection from now on: after the ROLLBACK
    // it would run on its own, committed.
    open = false;
    abortedBy = abortedError(cause, limits.maxSeconds);
    ending = abortTransaction(client, cause, limits, close);
    aborted(abortedBy);
  });
  const stopWatching = watch.stop;
  const session = reportingSessionLoss(client, watch.lost);
  const fenced = () => {
    if (!open) throw abortedBy ?? new Error(TRANSACTION_ENDED);
    return session;
  };
  const handlerClient: TransactionClient = {
    // Not async: its promise would resolve to pg's, two more promises and ticks per statement.
    query: ((text: unknown, values?: unknown[]) => {
      try {
        const result: unknown = passQuery(fenced(), text, values);
        return typeof (result as Promise<unknown> | undefined)?.then === 'function'
          ? result
          : Promise.resolve(result);
      } catch (err) {
        return Promise.reject(err as Error);
      }
    }) as TransactionClient['query'],
  };
  const end = (text: 'COMMIT' | 'ROLLBACK'): Promise<void> => {
    if (open) return endOpen(text);
    // Ended already: committed with its record (commitWith), or aborted and being rolled back.
    if (abortedBy === undefined) return ENDED;
    return Promise.resolve(ending).then(() => {
      if (text === 'COMMIT' && abortedBy) throw abortedBy;
    });
  };
  const endOpen = async (text: 'COMMIT' | 'ROLLBACK') => {
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
    // The store's own statements on the client itself: the session wrapper is not pg's client,
    // and pg's client is what lets them ask for the store's parsers and text results.
    run: async (config) => {
      fenced();
      try {
        return await queryWithin(client, config, timeoutMs);
      } catch (err) {
        if (sessionGone(client, err as Error)) watch.lost(err as Error);
        throw err;
      }
    },
    transaction: {
      manager: bind(handlerClient),
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
