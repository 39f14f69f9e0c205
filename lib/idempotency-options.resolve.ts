import { validateCronExpression } from 'cron';
import { quoteTable } from './store/postgres/table-names.js';
import { ResponseCipher } from './response-cipher.js';
import { derivedKeySecret } from './recovery/derived-key.js';
import { checkIdempotencyOptions } from './idempotency-options.check.js';
import { checkStorage } from './idempotency-storage.check.js';
import { describeValue } from './describe-value.js';
import { IDEMPOTENCY_DEFAULTS, type ResolvedIdempotencyOptions } from './idempotency.defaults.js';
import type { IdempotencyModuleOptions } from './interfaces/idempotency-module-options.interface.js';

function positive(name: string, value: number, min = Number.MIN_VALUE): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
    const what = min === 0 ? 'a non-negative number' : 'a positive number';
    throw new Error(`nestjs-pg-idempotency: ${name} must be ${what}, got ${describeValue(value)}`);
  }
  return value;
}

/** `Retry-After` takes whole seconds only (RFC 9110 `delay-seconds = 1*DIGIT`). */
function wholeSeconds(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new Error(
      `nestjs-pg-idempotency: ${name} must be a whole number of seconds, at least 1 (it is sent in Retry-After), got ${describeValue(value)}`,
    );
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

/**
 * A section (`cleanup`, `replayCache`) over its defaults. A field given as `undefined` keeps its
 * default, as a top-level option does (`maxEntries: Number(env.X) || undefined`), instead of
 * erasing it: an erased cache limit compared false against every size, and the cache grew forever.
 */
function withDefaults<T extends object>(defaults: T, given: Partial<T> | undefined): T {
  const merged = { ...defaults };
  for (const [name, value] of Object.entries(given ?? {})) {
    if (value !== undefined) (merged as Record<string, unknown>)[name] = value;
  }
  return merged;
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
    retryAfterSeconds: wholeSeconds(
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
    onRpcWithoutHandler: options.onRpcWithoutHandler,
    storeIf: options.storeIf ?? d.storeIf,
    cleanup: withDefaults(d.cleanup, options.cleanup),
    replayCache:
      options.replayCache === false ? false : withDefaults(d.replayCache, options.replayCache),
    encryption: options.encryption === undefined ? null : new ResponseCipher(options.encryption),
    derivedKeySecret: derivedKeySecret(options.derivedKeySecret),
  };
  positive('cleanup.batchSize', resolved.cleanup.batchSize);
  positive('cleanup.retentionSeconds', resolved.cleanup.retentionSeconds, 0);
  cronExpression('cleanup.cron', resolved.cleanup.cron);
  return resolved;
}
