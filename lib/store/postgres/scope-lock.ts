import { createHash } from 'node:crypto';
import type { IdempotencyScope } from '../../interfaces/idempotency-store.interface.js';

/**
 * The bigint of a scope's advisory lock (`pg_try_advisory_xact_lock`), as a decimal string bind
 * parameter: a single-commit transaction holds it while its handler runs, and every claimer of
 * the scope tries it, so a duplicate is refused at once instead of waiting on an uncommitted row.
 */
export function scopeLockKey(tableName: string, scope: IdempotencyScope): string {
  const digest = createHash('sha256')
    .update(JSON.stringify([tableName, scope.key, scope.endpoint, scope.userId]))
    .digest();
  return digest.readBigInt64BE(0).toString();
}
