import { CLEANUP_RUNS_MIN_RETENTION_SECONDS } from '../../idempotency.defaults.js';
import type { CleanupResult } from '../../interfaces/idempotency-store.interface.js';
import type { IdempotencyStatements } from './idempotency.sql.js';
import type { DeadlinePool } from './deadline-pool.js';
import { queryWithin } from './pg-deadline.js';

/**
 * Deletes expired records, archived records, replay and refusal rows in bounded batches (each
 * rolling its daily figures up as it deletes), in one
 * transaction that holds the cleanup's advisory lock: only one app instance cleans at a time, and
 * the lock ends with the transaction whatever happens (also behind a transaction pooler, where
 * one transaction keeps one server connection). The deletions commit together at the end, so a
 * claim on a key whose expired record this run deletes waits for the run.
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
    await run('BEGIN', []);
    const { rows } = await run(sql.cleanupLock, [lockName]);
    if (!rows[0]?.locked) {
      const last = (await run(sql.cleanupLastRun, [])).rows[0];
      await run('ROLLBACK', []);
      const lastRunMs = last?.last_run_ms as number | null;
      const at = new Date(last?.checked_ms as number);
      const skipped = { at, lastRunAt: lastRunMs == null ? null : new Date(lastRunMs) };
      return { ran: false, deleted: 0, batches: 0, longestBatchMs: 0, skipped };
    }
    let deleted = 0;
    let batches = 0;
    let longestBatchMs = 0;
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
    await run(sql.cleanupRun, [deleted, batches]);
    await run(sql.cleanupOldRuns, [
      Math.max(options.retentionSeconds, CLEANUP_RUNS_MIN_RETENTION_SECONDS),
    ]);
    await run('COMMIT', []);
    return { ran: true, deleted, batches, longestBatchMs: Math.round(longestBatchMs) };
  } catch (err) {
    failed = err as Error;
    throw err;
  } finally {
    // A failed connection (a hung one was ended) is not handed back for reuse; destroying it
    // also ends its transaction, and the lock with it.
    client.release(failed);
  }
}
