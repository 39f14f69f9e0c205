/** DI token of the {@link IdempotencyStore} the interceptor talks to. */
export const IDEMPOTENCY_STORE = Symbol('IDEMPOTENCY_STORE');

/** Response header set on every replayed response. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';

/** Name of the cron job registered with `SchedulerRegistry`. */
export const CLEANUP_JOB_NAME = 'nestjs-pg-idempotency:cleanup';

/** Problem `code` values; clients can branch on them. */
export const ProblemCode = {
  KeyMissing: 'idempotency_key_missing',
  KeyInvalid: 'idempotency_key_invalid',
  InProgress: 'request_in_progress',
  Mismatch: 'idempotency_key_reused_with_different_params',
  NotReplayable: 'idempotency_response_not_replayable',
  StoreUnavailable: 'idempotency_store_unavailable',
  BodyUnreadable: 'idempotency_body_unreadable',
  UserInvalid: 'idempotency_user_invalid',
  Misconfigured: 'idempotency_misconfigured',
  NothingToReplay: 'idempotency_nothing_to_replay',
} as const;
export type ProblemCode = (typeof ProblemCode)[keyof typeof ProblemCode];
