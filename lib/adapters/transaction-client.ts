import type { QueryConfig, QueryResult } from 'pg';

/**
 * The one PostgreSQL connection the store holds a request's transaction on, as an adapter sees it.
 * A `pg.PoolClient` satisfies it. In the default transactional mode the transaction begins on its
 * first query; in `'single'` mode it is already open and statements after an abort are refused.
 */
export interface TransactionClient {
  query(text: string | QueryConfig, values?: unknown[]): Promise<QueryResult>;
}

/**
 * Turns the store's transaction client into a tool's own handle (a Drizzle database, a Kysely
 * instance, a Prisma transaction client, ...) whose statements all run on that client, so they
 * commit or roll back with the idempotency record.
 */
export interface TransactionAdapter<M> {
  bind(client: TransactionClient): M;
}
