export { IdempotencyModule } from './idempotency.module.js';
export { Idempotent } from './idempotent.decorator.js';
export { IdempotencyInterceptor } from './idempotency.interceptor.js';
export { IdempotencyCleanupService } from './idempotency-cleanup.service.js';
export { ReplayAuditService, type ReplayAuditCounts } from './replay-audit.service.js';
export { PostgresIdempotencyStore } from './postgres-idempotency.store.js';
export {
  IdempotencyContext,
  IdempotencyCtx,
  getIdempotencyContext,
} from './idempotency-context.js';
export {
  IDEMPOTENCY_STORE,
  IDEMPOTENCY_RESOLVED_OPTIONS,
  IDEMPOTENT_METADATA,
  REPLAYED_HEADER,
  CLEANUP_JOB_NAME,
  ProblemCode,
} from './idempotency.constants.js';
export { IDEMPOTENCY_MODULE_OPTIONS } from './idempotency.module-definition.js';
export { IDEMPOTENCY_DEFAULTS, resolveIdempotencyOptions } from './idempotency.defaults.js';
export type { ResolvedIdempotencyOptions } from './idempotency.defaults.js';
export {
  IdempotencyProblemException,
  PROBLEM_CONTENT_TYPE,
  type IdempotencyProblem,
} from './idempotency.problems.js';
export { fingerprintRequest, canonicalJson } from './request-fingerprint.js';
export type * from './interfaces/idempotency-module-options.interface.js';
export type * from './interfaces/idempotent-options.interface.js';
export type * from './interfaces/idempotency-store.interface.js';
