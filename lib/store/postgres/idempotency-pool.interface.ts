import type { PoolClient, QueryConfig, QueryResult } from './pg-deadline.js';

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
