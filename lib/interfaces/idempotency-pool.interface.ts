/** The slice of pg's client and pool the store uses. */
export interface QueryConfig {
  name?: string;
  text: string;
  values: unknown[];
}
export interface QueryResult {
  rows: Record<string, unknown>[];
  rowCount: number | null;
}
export interface Queryable {
  /** `types` is pg's per-statement option: the store parses what it reads with its own parsers. */
  query(config: QueryConfig & { query_timeout?: number; types?: unknown }): Promise<QueryResult>;
}
export interface PoolClient extends Queryable {
  release(err?: Error | boolean): void;
  on(event: 'error', listener: (err: Error) => void): unknown;
  removeListener(event: 'error', listener: (err: Error) => void): unknown;
}
export interface Pool {
  connect(): Promise<PoolClient>;
  on?(event: 'connect', listener: (client: PoolClient) => void): unknown;
}

/**
 * The slice of a pg pool the PostgreSQL store uses; a `pg.Pool` is one (pass the app's own).
 * Statements go through `connect()` and the client's `query` (the store's deadlines need the
 * client). With a `pg.Pool` the store also watches for a changed server (its `error`, `release`
 * events and `options.verify`) and probes for a transaction pooler (`Client`, `options`).
 */
export interface IdempotencyPool {
  connect(): Promise<PoolClient>;
  query(config: QueryConfig): Promise<QueryResult>;
  on?(event: 'connect', listener: (client: PoolClient) => void): unknown;
  /** `max`: how many connections; single-commit transactions leave one of them free. */
  options?: { max?: number };
}
