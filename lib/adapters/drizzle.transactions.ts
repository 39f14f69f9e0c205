import type { ExtractTablesWithRelations } from 'drizzle-orm';
import { drizzle, NodePgTransaction, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import type { PgDialect } from 'drizzle-orm/pg-core';
import type { PoolClient } from 'pg';
import type { TransactionAdapter, TransactionClient } from './transaction-client.js';

/** The handle a Drizzle handler writes through: the object `db.transaction((tx) => ...)` gives. */
export type DrizzleTransaction<TSchema extends Record<string, unknown> = Record<string, never>> =
  NodePgTransaction<TSchema, ExtractTablesWithRelations<TSchema>>;

/**
 * The request's transaction as a Drizzle transaction object (node-postgres driver): its queries run
 * on the library's connection and commit or roll back with the idempotency record, and
 * `tx.transaction()` inside is a savepoint, as in any Drizzle transaction.
 *
 * @param factory Builds the Drizzle database on the connection; pass your `{ schema }` (for
 *   `tx.query.*`), `casing` or `logger` here. Drizzle only calls `query()` on the client.
 * @default (client) => drizzle(client)
 * @example drizzleTransactions((client) => drizzle(client, { schema }))
 */
export function drizzleTransactions<
  TSchema extends Record<string, unknown> = Record<string, never>,
>(
  factory: (client: PoolClient) => NodePgDatabase<TSchema> = (client) =>
    drizzle(client) as unknown as NodePgDatabase<TSchema>,
): TransactionAdapter<DrizzleTransaction<TSchema>> {
  return {
    bind(client: TransactionClient): DrizzleTransaction<TSchema> {
      // Drizzle types its client as pg's, but its session only ever calls `query()`.
      const db = factory(client as PoolClient);
      const { dialect } = db as unknown as { dialect: PgDialect };
      const { schema, fullSchema, tableNamesMap, session } = db._;
      // A transaction object, not the database: its `transaction()` nests as a savepoint where the
      // database's would send BEGIN and COMMIT, committing the library's transaction early.
      return new NodePgTransaction(
        dialect,
        session,
        schema && { fullSchema, schema, tableNamesMap },
      );
    },
  };
}
