import { SERIALIZATION_FAILURE } from './serialization-retry.js';

/**
 * What a failed claim statement says about the key, when it says anything:
 * - `busy`: `lock_timeout` (55P03) fired while waiting on a row of the records table, that is on
 *   another transaction writing this scope's record: an in-flight duplicate, not an outage.
 *   A wait on a table lock (a migration, say) has no row in its context and stays an error.
 * - `reread`: under REPEATABLE READ or SERIALIZABLE, a concurrent claim or takeover committed
 *   after this statement's snapshot (40001): a new statement sees what it wrote.
 */
export type Contention = 'busy' | 'reread';

export async function underContention<T extends object>(
  statement: () => Promise<T>,
): Promise<T | Contention> {
  try {
    return await statement();
  } catch (err) {
    const { code, where } = err as { code?: string; where?: string };
    if (code === '55P03' && / tuple /.test(where ?? '')) return 'busy';
    if (code === SERIALIZATION_FAILURE) return 'reread';
    throw err;
  }
}
