import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import type { IdempotencyTransaction } from '../../interfaces/idempotency-store.interface.js';

/**
 * A QueryRunner whose connection and transaction start on its first use, so a transactional
 * handler that first calls out (a card processor, say) holds no pool connection meanwhile, and
 * `now()` in its rows is the time of its first write. A transaction the handler (or TypeORM's
 * `save()`) starts itself nests inside it as a savepoint. `onBegin` runs right after BEGIN,
 * before the handler's first statement.
 */
export function lazyTransaction(
  dataSource: DataSource,
  onBegin: (runner: QueryRunner) => Promise<void> = async () => undefined,
): QueryRunner {
  const runner = dataSource.createQueryRunner();
  const query = runner.query.bind(runner);
  const start = runner.startTransaction.bind(runner);
  let begun: Promise<void> | undefined;
  let beginning = false;
  const begin = () =>
    (begun ??= (async () => {
      beginning = true;
      try {
        await start();
        await onBegin(runner);
      } finally {
        beginning = false;
      }
    })());
  runner.query = (async (...args: Parameters<QueryRunner['query']>) => {
    // START TRANSACTION itself goes through query(): let that one through.
    if (!beginning) await begin();
    return query(...args);
  }) as QueryRunner['query'];
  runner.startTransaction = async (...args: Parameters<QueryRunner['startTransaction']>) => {
    await begin();
    return start(...args);
  };
  return runner;
}

/** The store's handle on a lazy transaction: what the execution commits or rolls back. */
export function transactionHandle(runner: QueryRunner): IdempotencyTransaction<EntityManager> {
  const end = async (how: 'commitTransaction' | 'rollbackTransaction') => {
    try {
      if (runner.isTransactionActive) await runner[how]();
    } finally {
      await runner.release().catch(() => undefined);
    }
  };
  return {
    manager: runner.manager,
    get active() {
      return runner.isTransactionActive;
    },
    commit: () => end('commitTransaction'),
    rollback: () => end('rollbackTransaction'),
  };
}
