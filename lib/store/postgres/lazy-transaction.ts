import type { IdempotencyTransaction } from '../../interfaces/idempotency-store.interface.js';
import type { TransactionClient } from '../../interfaces/transaction-adapter.interface.js';
import {
  type PoolClient,
  type Queryable,
  type QueryConfig,
  type QueryResult,
  queryWithin,
} from './pg-deadline.js';
import type { DeadlinePool } from './deadline-pool.js';

/** A transaction the store opened: the handler's handle, and the store's own way into it. */
export interface StoreTransaction<TManager> {
  readonly transaction: IdempotencyTransaction<TManager>;
  /** A statement of the store in the transaction, under the store's deadline. */
  run(config: QueryConfig): Promise<QueryResult>;
}

export const TRANSACTION_ENDED = 'nestjs-pg-idempotency: the transaction already ended';

/** pg's `query(text, values)` or `query(config)`, as the caller gave it. */
export function passQuery(client: Queryable, text: unknown, values?: unknown[]) {
  const query = client.query as unknown as (t: unknown, v?: unknown[]) => Promise<QueryResult>;
  return values === undefined ? query.call(client, text) : query.call(client, text, values);
}

/**
 * A transaction whose connection and BEGIN come with its first statement, so a transactional
 * handler that first calls out (a card processor, say) holds no pool connection meanwhile, and
 * `now()` in its rows is the time of its first write. `onBegin` runs right after BEGIN, before
 * the handler's first statement. The handler writes through `bind(client)`.
 */
export function lazyTransaction<TManager>(
  pool: DeadlinePool,
  bind: (client: TransactionClient) => TManager,
  onBegin: (transaction: IdempotencyTransaction<TManager>) => Promise<void>,
): StoreTransaction<TManager> {
  let connection: PoolClient | undefined;
  let begun: Promise<PoolClient> | undefined;
  let beginning = false;
  let open = false;
  let ended = false;
  const begin = () =>
    (begun ??= (async () => {
      const client = await pool.connect();
      try {
        await queryWithin(client, { text: 'BEGIN', values: [] }, pool.timeoutMs);
      } catch (err) {
        client.release(err as Error);
        throw err;
      }
      connection = client;
      open = true;
      beginning = true;
      try {
        await onBegin(transaction);
      } finally {
        beginning = false;
      }
      return client;
    })());
  /** The connection in the transaction; during `onBegin`, without waiting for it. */
  const inTransaction = async () => {
    if (ended) throw new Error(TRANSACTION_ENDED);
    return beginning ? (connection as PoolClient) : begin();
  };
  const client: TransactionClient = {
    query: (async (text: unknown, values?: unknown[]) =>
      passQuery(await inTransaction(), text, values)) as TransactionClient['query'],
  };
  let ending: Promise<void> | undefined;
  const end = (text: 'COMMIT' | 'ROLLBACK') => {
    if (ending) return ending.catch(() => undefined);
    return (ending = (async () => {
      // A BEGIN still on its way: end what it opens.
      await begun?.catch(() => undefined);
      ended = true;
      const held = connection;
      if (!held) return;
      open = false;
      try {
        await queryWithin(held, { text, values: [] }, pool.timeoutMs);
        held.release();
      } catch (err) {
        held.release(err as Error);
        throw err;
      }
    })());
  };
  const transaction: IdempotencyTransaction<TManager> = {
    manager: bind(client),
    get active() {
      return open;
    },
    commit: () => end('COMMIT'),
    rollback: () => end('ROLLBACK'),
  };
  return {
    transaction,
    run: async (config) => queryWithin(await inTransaction(), config, pool.timeoutMs),
  };
}
