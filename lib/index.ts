// The public API. Everything else under lib/ is internal and may change in any release.
export { IdempotencyModule } from './idempotency.module.js';
export { Idempotent } from './decorators/idempotent.decorator.js';
export { IdempotencyContext, getIdempotencyContext } from './execution/idempotency-context.js';
export { IdempotencyCtx } from './decorators/idempotency-ctx.decorator.js';
export { IdempotencyCleanupService } from './store/idempotency-cleanup.service.js';
export {
  PostgresIdempotencyStore,
  type PostgresIdempotencyStoreOptions,
} from './store/postgres/postgres-idempotency.store.js';
export { pgTransactions } from './store/postgres/pg-transactions.adapter.js';
export { typeormTransactions } from './store/postgres/typeorm-transactions.adapter.js';
export type * from './interfaces/transaction-adapter.interface.js';
export type { IdempotencyPool } from './interfaces/idempotency-pool.interface.js';
export { migrate, type MigrateOptions, type MigrationPool } from '../migrations/migrate.js';
export { TransactionAbortedError } from './store/transaction-aborted.error.js';
export { RecoveryPointError } from './recovery/recovery-point.error.js';
export {
  IDEMPOTENCY_STORE,
  REPLAYED_HEADER,
  CLEANUP_JOB_NAME,
  ProblemCode,
} from './idempotency.constants.js';
export { IdempotencyGraphQLError } from './transports/value/value-problem.js';
export { IDEMPOTENCY_DEFAULTS } from './idempotency.defaults.js';
export { defaultUserId } from './idempotency.defaults.js';
export {
  IdempotencyProblemException,
  PROBLEM_CONTENT_TYPE,
  type IdempotencyProblem,
} from './idempotency.problems.js';
export type * from './interfaces/idempotency-module-options.interface.js';
export type * from './interfaces/idempotent-options.interface.js';
export type * from './interfaces/idempotency-store.interface.js';
