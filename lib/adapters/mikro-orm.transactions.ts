import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { QueryConfig, QueryResult } from 'pg';
import type { TransactionAdapter, TransactionClient } from './transaction-client.js';

/** The parts of knex's client MikroORM's queries reach through a transaction context. */
interface KnexClient {
  transacting?: boolean;
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<void>;
  transaction(container: unknown, config: object, outerTx: unknown): PromiseLike<unknown>;
}

/**
 * The request's transaction as a MikroORM 6 `EntityManager` (a fork of `orm.em`): its `flush()`
 * and queries run on the library's connection and commit or roll back with the idempotency
 * record; `em.transactional()` and `em.begin()` on it are savepoints. The ORM's own pool is not
 * used (init it with `connect: false` or `MikroORM.initSync` so it opens no connection either).
 *
 * @param orm Your initialized `MikroORM` (`@mikro-orm/postgresql`).
 * @example mikroOrmTransactions(orm)
 */
export function mikroOrmTransactions(orm: MikroORM): TransactionAdapter<EntityManager> {
  return {
    bind(client: TransactionClient): EntityManager {
      const em = orm.em.fork();
      em.setTransactionContext(
        transactionOn(em.getKnex().client as KnexClient, connectionOf(client)) as never,
      );
      return em;
    },
  };
}

/** A connection as knex's PostgreSQL client uses it: pg's callback-style `query`. */
function connectionOf(client: TransactionClient) {
  return {
    query(config: QueryConfig, done: (error: Error | null, result?: QueryResult) => void) {
      // The object is pg's own QueryResult: the client is a pg connection.
      client.query(config).then((result) => done(null, result as QueryResult), done);
    },
  };
}

/**
 * A knex transaction already open on `connection` (the library's): what MikroORM takes as a
 * transaction context. Knex builds one only by sending BEGIN, and only asynchronously, so this is
 * knex's own transaction client (`transacting`, one connection, never released) with no BEGIN;
 * transactions started on it are knex's nested ones, savepoints.
 */
function transactionOn(knexClient: KnexClient, connection: unknown) {
  const client: KnexClient = Object.create(knexClient);
  client.transacting = true;
  client.acquireConnection = () => Promise.resolve(connection);
  client.releaseConnection = () => Promise.resolve();
  // What knex's nested transactions read of their parent: siblings run one after the other.
  const parent = { _lastChild: Promise.resolve(), isCompleted: () => false };
  return {
    client,
    isTransaction: true,
    transaction(container: unknown, options: { isolationLevel?: string; readOnly?: boolean }) {
      if (options?.isolationLevel || options?.readOnly) {
        throw new Error(
          'A MikroORM transaction inside the idempotency transaction is a savepoint: it cannot ' +
            'set an isolation level or read-only mode (set them on the database or role instead)',
        );
      }
      const config = { ...options, doNotRejectOnRollback: true };
      if (container) return client.transaction(container, config, parent);
      return new Promise((resolve, reject) => {
        client.transaction(resolve, config, parent).then(undefined, reject);
      });
    },
  };
}
