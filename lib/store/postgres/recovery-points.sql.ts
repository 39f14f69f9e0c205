import { quoteTable, statementSuffix } from './table-names.js';
import { tableNames } from './table-names.js';
import { ownedClaim } from './owned-claim.js';

/** The statements of `ctx.step()`: both fenced by the claim's token, like every write of a run. */
export function buildRecoveryPointStatements(tableName: string) {
  const { records: t, steps } = tableNames(tableName, quoteTable);
  const suffix = statementSuffix(tableName);
  const owned = ownedClaim('k');
  return {
    /** Reads a committed step and counts the read as a resume, in one statement. */
    load: {
      name: `idem_step_load_${suffix}`,
      text: `UPDATE ${steps} s SET resumed_count = s.resumed_count + 1, last_resumed_at = now()
  FROM ${t} k
 WHERE s.record_id = $1 AND s.name = $3 AND ${owned}
RETURNING s.result, s.result_key_id`,
    },
    save: {
      name: `idem_step_save_${suffix}`,
      text: `INSERT INTO ${steps} (record_id, name, result, result_key_id, run)
SELECT k.id, $3, $4, $5, k.runs FROM ${t} k WHERE ${owned}
ON CONFLICT (record_id, name) DO NOTHING
RETURNING record_id`,
    },
  };
}

/**
 * Cleanup's batch ($1 batch size, $2 retention) for recovery points whose record is gone from
 * both the records table and the archive (deleted by cleanup, or released after a failure):
 * nothing can resume from them any more.
 */
export function orphanedStepsCleanup(tableName: string): string {
  const { records: t, archive, steps } = tableNames(tableName, quoteTable);
  return `WITH gone AS (
  DELETE FROM ${steps} WHERE (record_id, name) IN (
    SELECT s.record_id, s.name FROM ${steps} s
     WHERE s.completed_at < now() - make_interval(secs => $2)
       AND NOT EXISTS (SELECT 1 FROM ${t} k WHERE k.id = s.record_id)
       AND NOT EXISTS (SELECT 1 FROM ${archive} a WHERE a.id = s.record_id)
     LIMIT $1
     FOR UPDATE SKIP LOCKED)
  RETURNING 1
)
SELECT count(*)::int AS deleted FROM gone`;
}

export type RecoveryPointStatements = ReturnType<typeof buildRecoveryPointStatements>;
