// The public API. Everything else under lib/ is internal and may change in any release.
export { IdempotencyModule } from './idempotency.module.js';
export { Idempotent } from './decorators/idempotent.decorator.js';
export {
  IdempotencyContext,
  IdempotencyCtx,
  getIdempotencyContext,
} from './decorators/idempotency-context.js';
export { IdempotencyCleanupService } from './store/idempotency-cleanup.service.js';
export {
  PostgresIdempotencyStore,
  type PostgresIdempotencyStoreOptions,
} from './store/postgres/postgres-idempotency.store.js';
export { pgTransactions } from './store/postgres/pg-transactions.adapter.js';
export { typeormTransactions } from './store/postgres/typeorm-transactions.adapter.js';
export type * from './store/transaction-adapter.interface.js';
export type { IdempotencyPool } from './store/postgres/idempotency-pool.interface.js';
export { migrate, type MigrateOptions, type MigrationPool } from '../migrations/migrate.js';
export { TransactionAbortedError } from './store/transaction-aborted.error.js';
export {
  IDEMPOTENCY_STORE,
  REPLAYED_HEADER,
  CLEANUP_JOB_NAME,
  ProblemCode,
} from './idempotency.constants.js';
export { IdempotencyGraphQLError } from './transports/value-problem.js';
export { IDEMPOTENCY_DEFAULTS } from './idempotency.defaults.js';
export { defaultUserId } from './http/request-scope.js';
export {
  IdempotencyProblemException,
  PROBLEM_CONTENT_TYPE,
  type IdempotencyProblem,
} from './idempotency.problems.js';
export type * from './interfaces/idempotency-module-options.interface.js';
export type * from './interfaces/idempotent-options.interface.js';
export type * from './store/idempotency-store.interface.js';
