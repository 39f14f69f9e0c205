import { PrismaPg } from '@prisma/adapter-pg';
import type { ITXClientDenyList } from '@prisma/client/runtime/client';
import pg from 'pg';
import type { TransactionAdapter, TransactionClient } from './transaction-client.js';

/** What `prisma.$transaction(async (tx) => ...)` hands its callback: `Prisma.TransactionClient`. */
export type PrismaTransactionClient<C> = Omit<C, ITXClientDenyList>;

/** `@prisma/adapter-pg` options (`schema`, `userDefinedTypeParser`, ...). */
export type PrismaPgOptions = NonNullable<ConstructorParameters<typeof PrismaPg>[1]>;

type PgAdapter = Awaited<ReturnType<PrismaPg['connect']>>;
type PgTransaction = Awaited<ReturnType<PgAdapter['startTransaction']>>;

/**
 * The request's transaction as a Prisma 7 interactive transaction client (`tx`): every query,
 * including the ones Prisma wraps in a transaction of its own (nested writes), runs on the
 * library's connection and commits or rolls back with the idempotency record. `tx.$transaction()`
 * on it is a savepoint. Each request builds one PrismaClient on `@prisma/adapter-pg`; it opens no
 * connection and needs no `$disconnect()`.
 *
 * @param factory Builds your generated PrismaClient on the given adapter, with your client options.
 * @param pgOptions `@prisma/adapter-pg` options, e.g. `{ schema }`.
 * @default pgOptions: {}
 * @example prismaTransactions((adapter) => new PrismaClient({ adapter }))
 */
export function prismaTransactions<C extends object>(
  factory: (adapter: PrismaPg) => C,
  pgOptions: PrismaPgOptions = {},
): TransactionAdapter<PrismaTransactionClient<C>> {
  return {
    bind: (client: TransactionClient) => factory(new BoundPrismaPg(boundPool(client), pgOptions)),
  };
}

/** A pg Pool (PrismaPg takes no other pool-like object) that sends every query to `client`. */
function boundPool(client: TransactionClient): pg.Pool {
  const pool = new pg.Pool();
  pool.query = ((config: pg.QueryConfig) => client.query(config)) as typeof pool.query;
  pool.connect = (() => Promise.reject(new Error('unreachable'))) as typeof pool.connect;
  return pool;
}

class BoundPrismaPg extends PrismaPg {
  override async connect(): Promise<PgAdapter> {
    return withSavepoints(await super.connect());
  }
}

/**
 * Prisma's transactions (`$transaction`, nested writes) become savepoints: PrismaPg's own would
 * take a pool connection and send BEGIN and COMMIT on it, committing the library's work early.
 */
function withSavepoints(adapter: PgAdapter): PgAdapter {
  const run = async (sql: string) => {
    await adapter.executeRaw({ sql, args: [], argTypes: [] });
  };
  let opened = 0;
  const startTransaction = async (isolationLevel?: string): Promise<PgTransaction> => {
    if (isolationLevel) {
      throw new Error(
        'A Prisma transaction inside the idempotency transaction is a savepoint: it cannot set ' +
          'an isolation level (set it on the database or role instead)',
      );
    }
    const name = `prisma_idempotency_${++opened}`;
    await run(`SAVEPOINT ${name}`);
    // usePhantomQuery: Prisma ends it through commit()/rollback() alone, sending no COMMIT itself.
    return Object.assign(Object.create(adapter) as PgTransaction, {
      options: { usePhantomQuery: true },
      commit: () => run(`RELEASE SAVEPOINT ${name}`),
      rollback: () => run(`ROLLBACK TO SAVEPOINT ${name}`),
      createSavepoint: (savepoint: string) => run(`SAVEPOINT ${savepoint}`),
      rollbackToSavepoint: (savepoint: string) => run(`ROLLBACK TO SAVEPOINT ${savepoint}`),
      releaseSavepoint: (savepoint: string) => run(`RELEASE SAVEPOINT ${savepoint}`),
    });
  };
  return Object.assign(Object.create(adapter) as PgAdapter, { startTransaction });
}
