/** A statement as pg takes it: `name`, `rowMode`, `types` pass through to pg unchanged. */
export interface TransactionQueryConfig {
  text: string;
  values?: unknown[];
  name?: string;
  rowMode?: 'array';
  types?: unknown;
}

/** pg's `QueryResult`, as far as the library relies on it (the object is pg's own). */
export interface TransactionQueryResult<R = Record<string, unknown>> {
  rows: R[];
  rowCount: number | null;
  command: string;
  fields?: unknown[];
}

/**
 * The connection the store holds for a transactional handler, with pg's `query` API. In the
 * default mode (`transactional: true`) BEGIN runs on the first query, so a handler that calls
 * out first holds no connection meanwhile; in single-commit mode (`'single'`) the transaction is
 * already open, and once it was aborted (`singleCommitMaxSeconds`, a lost session) every query
 * fails. The store commits or rolls it back: a handler never sends COMMIT or ROLLBACK (nest with
 * SAVEPOINT instead). After the transaction ended, every query fails.
 */
export interface TransactionClient {
  query<R = Record<string, unknown>>(
    text: string | TransactionQueryConfig,
    values?: unknown[],
  ): Promise<TransactionQueryResult<R>>;
}

/**
 * Turns the store's `TransactionClient` into what the handler writes through
 * (`IdempotencyContext.manager`): the client itself (`pgTransactions()`), a TypeORM
 * `EntityManager` (`typeormTransactions(dataSource)`), or another tool's transaction object.
 * `bind` is called once per transaction, before its first statement: it must not query.
 * @example
 * const adapter: TransactionAdapter<TransactionClient> = { bind: (client) => client };
 */
export interface TransactionAdapter<TManager = unknown> {
  bind(client: TransactionClient): TManager;
}

/** An adapter, or its `bind` alone (`(client) => manager`). */
export type TransactionAdapterLike<TManager = unknown> =
  TransactionAdapter<TManager> | ((client: TransactionClient) => TManager);

/** The `bind` of an adapter given either way. */
export function adapterBind<TManager>(
  adapter: TransactionAdapterLike<TManager>,
): (client: TransactionClient) => TManager {
  // A function has a `bind` of its own (Function.prototype.bind): test for a function first.
  if (typeof adapter === 'function') return adapter;
  return (client) => adapter.bind(client);
}
