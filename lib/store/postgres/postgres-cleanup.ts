import { CLEANUP_RUNS_MIN_RETENTION_SECONDS } from '../../idempotency.defaults.js';
import type { CleanupResult } from '../idempotency-store.interface.js';
import type { IdempotencyStatements } from './idempotency.sql.js';
import { type DeadlinePool, queryWithin } from './pg-deadline.js';

/**
 * Deletes expired records, archived records and replay rows in bounded batches, each its own
 * short statement, under an advisory lock only one app instance holds at a time.
 */
export async function runCleanup(
  pool: DeadlinePool,
  sql: IdempotencyStatements,
  tableName: string,
  options: { batchSize: number; retentionSeconds: number },
): Promise<CleanupResult> {
  const lockName = `nestjs-pg-idempotency:cleanup:${tableName}`;
  const client = await pool.connect();
  const run = (text: string, values: unknown[]) =>
    queryWithin(client, { text, values }, pool.timeoutMs);
  let failed: Error | undefined;
  try {
    const { rows } = await run(sql.cleanupLock, [lockName]);
    if (!rows[0]?.locked) return { ran: false, deleted: 0, batches: 0, longestBatchMs: 0 };
    const startedAt = new Date();
    let deleted = 0;
    let batches = 0;
    let longestBatchMs = 0;
    try {
      for (const [index, text] of sql.cleanupBatches.entries()) {
        for (;;) {
          const started = performance.now();
          const { rows } = await run(text, [options.batchSize, options.retentionSeconds]);
          const rowCount = rows[0]?.deleted as number;
          longestBatchMs = Math.max(longestBatchMs, performance.now() - started);
          batches++;
          // Records count as deleted; replay and refusal events of those records go with them.
          if (index < 2) deleted += rowCount;
          if (rowCount < options.batchSize) break;
        }
      }
      await run(sql.cleanupRun, [startedAt, deleted, batches]);
      await run(sql.cleanupOldRuns, [
        Math.max(options.retentionSeconds, CLEANUP_RUNS_MIN_RETENTION_SECONDS),
      ]);
    } finally {
      await run(sql.cleanupUnlock, [lockName]);
    }
    return { ran: true, deleted, batches, longestBatchMs: Math.round(longestBatchMs) };
  } catch (err) {
    failed = err as Error;
    throw err;
  } finally {
    // A failed connection (a hung one was ended) is not handed back for reuse.
    client.release(failed);
  }
}
