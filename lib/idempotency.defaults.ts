import { validateCronExpression } from 'cron';
import type { DataSource } from 'typeorm';
import { quoteTable } from './store/postgres/idempotency.sql.js';
import type { ReplayCacheLimits } from './execution/replay-cache.js';
import { ResponseCipher } from './store/response-cipher.js';
import { derivedKeySecret } from './recovery/derived-key.js';
import type { KeyObject } from 'node:crypto';
import { checkIdempotencyOptions } from './idempotency-options.check.js';
import { checkStorage } from './idempotency-storage.check.js';
import { defaultUserId } from './http/request-scope.js';
import type { IdempotencyStore } from './store/idempotency-store.interface.js';
import type { IdempotencyPool } from './store/postgres/idempotency-pool.interface.js';
import type { TransactionAdapterLike } from './store/transaction-adapter.interface.js';
import type {
  IdempotencyModuleOptions,
  IdempotencyRequest,
  StoreIfFn,
} from './interfaces/idempotency-module-options.interface.js';

/** Cleanup keeps its run log at least this long (30 days), or `retentionSeconds` if longer. */
export const CLEANUP_RUNS_MIN_RETENTION_SECONDS = 30 * 86_400;

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
 * A completion write that failed after the handler ran is retried in the background, from this
 * delay doubling up to the cap (and at least every third of the lease, which it renews).
 */
export const COMPLETION_RETRY = { firstDelayMs: 100, maxDelayMs: 5_000 };

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
  >
> {
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

/** `-1`, `NaN`, `string "3600"`: what was passed, with its type when it is not a number. */
export function describeValue(value: unknown): string {
  if (typeof value === 'number') return String(value);
  let shown: string;
  try {
    shown = JSON.stringify(value) ?? String(value);
  } catch {
    shown = String(value);
  }
  return `${value === null ? 'null' : typeof value} ${shown}`;
}

function positive(name: string, value: number, min = Number.MIN_VALUE): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
    const what = min === 0 ? 'a non-negative number' : 'a positive number';
    throw new Error(`nestjs-pg-idempotency: ${name} must be ${what}, got ${describeValue(value)}`);
  }
  return value;
}

/** A bad expression would otherwise crash bootstrap later with the cron package's bare error. */
function cronExpression(name: string, value: string): string {
  const check =
    typeof value === 'string'
      ? validateCronExpression(value)
      : { valid: false, error: new Error('not a string') };
  if (!check.valid) {
    throw new Error(
      `nestjs-pg-idempotency: ${name} must be a cron expression (e.g. '0 */10 * * * *'), got ${describeValue(value)}: ${check.error?.message}`,
    );
  }
  return value;
}

/** Merges user options over the defaults once, and rejects settings that cannot work. */
export function resolveIdempotencyOptions(
  options: IdempotencyModuleOptions,
): ResolvedIdempotencyOptions {
  checkIdempotencyOptions(options);
  checkStorage(options);
  const d = IDEMPOTENCY_DEFAULTS;
  const tableName = options.tableName ?? d.tableName;
  quoteTable(tableName);
  const resolved: ResolvedIdempotencyOptions = {
    dataSource: options.dataSource,
    pool: options.pool,
    transactions: options.transactions,
    store: options.store ?? null,
    ttlSeconds: positive('ttlSeconds', options.ttlSeconds ?? d.ttlSeconds),
    headerName: (options.headerName ?? d.headerName).toLowerCase(),
    leaseSeconds: positive('leaseSeconds', options.leaseSeconds ?? d.leaseSeconds),
    maxHoldSeconds: positive('maxHoldSeconds', options.maxHoldSeconds ?? d.maxHoldSeconds),
    retryAfterSeconds: positive(
      'retryAfterSeconds',
      options.retryAfterSeconds ?? d.retryAfterSeconds,
    ),
    replayHeaders: new Set(
      (options.replayHeaders ?? d.replayHeaders)
        .map((h) => h.toLowerCase())
        .filter((h) => h !== 'set-cookie'),
    ),
    maxResponseBytes: positive('maxResponseBytes', options.maxResponseBytes ?? d.maxResponseBytes),
    mismatchStatus: options.mismatchStatus ?? d.mismatchStatus,
    tableName,
    replayAudit: options.replayAudit ?? d.replayAudit,
    replayAuditFlushMs: positive(
      'replayAuditFlushMs',
      options.replayAuditFlushMs ?? d.replayAuditFlushMs,
    ),
    replayAuditMaxBuffered: positive(
      'replayAuditMaxBuffered',
      options.replayAuditMaxBuffered ?? d.replayAuditMaxBuffered,
      1,
    ),
    statementTimeoutMs: positive(
      'statementTimeoutMs',
      options.statementTimeoutMs ?? d.statementTimeoutMs,
      1,
    ),
    preparedStatements: options.preparedStatements ?? d.preparedStatements,
    singleCommitMaxSeconds: positive(
      'singleCommitMaxSeconds',
      options.singleCommitMaxSeconds ?? d.singleCommitMaxSeconds,
    ),
    getUserId: options.getUserId ?? d.getUserId,
    fingerprint: options.fingerprint ?? d.fingerprint,
    getRpcKey: options.getRpcKey ?? d.getRpcKey,
    getRpcUserId: options.getRpcUserId ?? d.getRpcUserId,
    storeIf: options.storeIf ?? d.storeIf,
    cleanup: { ...d.cleanup, ...options.cleanup },
    replayCache:
      options.replayCache === false ? false : { ...d.replayCache, ...options.replayCache },
    encryption: options.encryption === undefined ? null : new ResponseCipher(options.encryption),
    derivedKeySecret: derivedKeySecret(options.derivedKeySecret),
  };
  positive('cleanup.batchSize', resolved.cleanup.batchSize);
  positive('cleanup.retentionSeconds', resolved.cleanup.retentionSeconds, 0);
  cronExpression('cleanup.cron', resolved.cleanup.cron);
  return resolved;
}
