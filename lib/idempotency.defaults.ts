import type { DataSource } from 'typeorm';
import type { ResponseCipher } from './response-cipher.js';
import type { KeyObject } from 'node:crypto';
import type { IdempotencyStore } from './interfaces/idempotency-store.interface.js';
import type { IdempotencyPool } from './interfaces/idempotency-pool.interface.js';
import type { TransactionAdapterLike } from './interfaces/transaction-adapter.interface.js';
import type {
  IdempotencyModuleOptions,
  IdempotencyRequest,
  StoreIfFn,
} from './interfaces/idempotency-module-options.interface.js';

/** Cleanup keeps its run log at least this long (30 days), or `retentionSeconds` if longer. */
export const CLEANUP_RUNS_MIN_RETENTION_SECONDS = 30 * 86_400;

/**
 * The default `getUserId`: `id`, or what JWT guards put there: the payload itself (`sub`) or
 * passport-jwt's `{ userId }`. Exported so an app's own `getUserId` can fall back to it.
 * @example getUserId: (req) => req.user?.accountId ?? defaultUserId(req)
 */
export const defaultUserId = (req: IdempotencyRequest): string | number | bigint | undefined =>
  req.user?.id ?? req.user?.sub ?? req.user?.userId;

/** Every default of the library, in one place. */
export const IDEMPOTENCY_DEFAULTS = {
  ttlSeconds: 86_400,
  headerName: 'Idempotency-Key',
  leaseSeconds: 60,
  maxHoldSeconds: 300,
  retryAfterSeconds: 2,
  replayHeaders: [
    'content-type',
    'content-language',
    'content-disposition',
    'location',
    'link',
    'etag',
    'content-encoding',
    'cache-control',
    'vary',
  ],
  maxResponseBytes: 1_048_576,
  mismatchStatus: 409 as 409 | 422,
  tableName: 'idempotency_keys',
  replayAudit: 'batched' as 'batched' | 'off',
  replayAuditFlushMs: 1_000,
  replayAuditMaxBuffered: 10_000,
  statementTimeoutMs: 5_000,
  preparedStatements: true,
  singleCommitMaxSeconds: 60,
  replayCache: { maxEntries: 10_000, maxBytes: 32 * 1024 * 1024, ttlSeconds: 60 },
  /** Per route (`@Idempotent({ storeResponse })`): keep the whole response for replay. */
  storeResponse: 'full' as 'full' | 'digest',
  getUserId: defaultUserId,
  fingerprint: (req: IdempotencyRequest) => req.body,
  getRpcKey: (data: { idempotencyKey?: unknown } | null | undefined) => data?.idempotencyKey,
  // Callers of a microservice are services: no user unless the app says where one is.
  getRpcUserId: (_data: unknown, _context: unknown): string | undefined => undefined,
  // The status the client receives decides: an unknown error an app's filter turns into 402 is
  // a business outcome; one that reaches the client as 500 is not.
  storeIf: ((status) => status < 500 && status !== 400 && status !== 422) as StoreIfFn,
  cleanup: {
    enabled: true,
    cron: '0 */10 * * * *',
    batchSize: 1_000,
    // A year of statements and a month to reconcile them: history outlives the replay window.
    retentionSeconds: 400 * 86_400,
  },
};

/**
 * How long a graceful shutdown waits for the runs in flight (handlers running, outcomes being
 * written) before the DataSource closes: at most this, and never past a lease.
 */
export const SHUTDOWN_DRAIN_MAX_MS = 10_000;

/**
 * A completion write that failed after the handler ran is retried in the background, from this
 * delay doubling up to the cap (and at least every third of the lease, which it renews); the
 * smaller fallbacks are tried anyway once this many attempts in a row got no answer.
 */
export const COMPLETION_RETRY = {
  firstDelayMs: 100,
  maxDelayMs: 5_000,
  fallBackAfterUnanswered: 3,
};

export interface ReplayCacheLimits {
  maxEntries: number;
  maxBytes: number;
  ttlSeconds: number;
}

export interface ResolvedIdempotencyOptions extends Required<
  Omit<
    IdempotencyModuleOptions,
    | 'cleanup'
    | 'replayHeaders'
    | 'replayCache'
    | 'encryption'
    | 'dataSource'
    | 'pool'
    | 'transactions'
    | 'store'
    | 'derivedKeySecret'
    | 'onRpcWithoutHandler'
  >
> {
  /** Unset: nothing is called, and RPC calls are not watched for it. */
  onRpcWithoutHandler?: IdempotencyModuleOptions['onRpcWithoutHandler'];
  /** One of `pool` and `dataSource` is set, unless there is a custom `store`. */
  dataSource?: DataSource;
  pool?: IdempotencyPool;
  transactions?: TransactionAdapterLike;
  /** The custom store; null for the PostgreSQL one on `dataSource`. */
  store: IdempotencyStore | null;
  /** Lower-cased allow-list, never containing `set-cookie`. */
  replayHeaders: ReadonlySet<string>;
  cleanup: Required<NonNullable<IdempotencyModuleOptions['cleanup']>>;
  replayCache: false | ReplayCacheLimits;
  /** Null when stored responses are kept in plaintext. */
  encryption: ResponseCipher | null;
  /** Null when `ctx.keyFor()` is unavailable. */
  derivedKeySecret: KeyObject | null;
}
