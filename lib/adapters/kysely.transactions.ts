import {
  CompiledQuery,
  Kysely,
  PostgresDialect,
  PostgresDriver,
  type DatabaseConnection,
  type Driver,
  type KyselyConfig,
  type PostgresDialectConfig,
  type PostgresPool,
  type TransactionSettings,
} from 'kysely';
import type { TransactionAdapter, TransactionClient } from './transaction-client.js';

/** Options of the bound Kysely instance: everything but the dialect (plugins, log). */
export type KyselyTransactionOptions = Omit<KyselyConfig, 'dialect'>;

/**
 * The request's transaction as a `Kysely<DB>`: its queries run on the library's connection and
 * commit or roll back with the idempotency record. `db.transaction()` and `db.startTransaction()`
 * on it open a savepoint (released on success, rolled back to on failure), never a transaction
 * of their own, since a `COMMIT` there would end the library's transaction early.
 *
 * @param options Kysely options besides the dialect, e.g. your `plugins` or `log`.
 * @default {}
 * @example kyselyTransactions<Database>({ plugins: [new CamelCasePlugin()] })
 */
export function kyselyTransactions<DB>(
  options: KyselyTransactionOptions = {},
): TransactionAdapter<Kysely<DB>> {
  return {
    bind(client: TransactionClient): Kysely<DB> {
      // A pool whose only connection is the bound client; releasing it leaves it to the store.
      const connection = {
        query: (sql: string, parameters: readonly unknown[]) => client.query(sql, [...parameters]),
        release: () => undefined,
      };
      const pool = {
        connect: () => Promise.resolve(connection),
        end: () => Promise.resolve(),
      } as unknown as PostgresPool;
      return new Kysely<DB>({ ...options, dialect: new SavepointDialect({ pool }) });
    },
  };
}

class SavepointDialect extends PostgresDialect {
  readonly #config: PostgresDialectConfig;

  constructor(config: PostgresDialectConfig) {
    super(config);
    this.#config = config;
  }

  override createDriver(): Driver {
    return new SavepointDriver(this.#config);
  }
}

/** Kysely's PostgreSQL driver with its transactions turned into savepoints of the outer one. */
class SavepointDriver extends PostgresDriver {
  readonly #open: string[] = [];
  #opened = 0;

  override async beginTransaction(
    connection: DatabaseConnection,
    settings: TransactionSettings,
  ): Promise<void> {
    if (settings.isolationLevel || settings.accessMode) {
      throw new Error(
        'A Kysely transaction inside the idempotency transaction is a savepoint: it cannot set ' +
          'an isolation level or access mode (set them on the database or role instead)',
      );
    }
    const name = `kysely_savepoint_${++this.#opened}`;
    await connection.executeQuery(CompiledQuery.raw(`SAVEPOINT ${name}`));
    this.#open.push(name);
  }

  override async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`RELEASE SAVEPOINT ${this.#open.pop()}`));
  }

  override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`ROLLBACK TO SAVEPOINT ${this.#open.pop()}`));
  }
}
