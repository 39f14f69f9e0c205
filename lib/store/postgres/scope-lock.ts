import { hash } from 'node:crypto';
import type { IdempotencyScope } from '../../interfaces/idempotency-store.interface.js';

/**
 * The bigint of a scope's advisory lock (`pg_try_advisory_xact_lock`), as a decimal string bind
 * parameter: a single-commit transaction holds it while its handler runs, and every claimer of
 * the scope tries it, so a duplicate is refused at once instead of waiting on an uncommitted row.
 */
export function scopeLockKey(tableName: string, scope: IdempotencyScope): string {
  // One-shot hash of the same bytes: the same key as createHash's (kept across versions, so
  // instances of two releases still exclude each other), without a Hash object per claim.
  const hex = hash('sha256', JSON.stringify([tableName, scope.key, scope.endpoint, scope.userId]));
  return BigInt.asIntN(64, BigInt('0x' + hex.slice(0, 16))).toString();
}
