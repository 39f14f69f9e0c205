import { createHash } from 'node:crypto';
import { quoteTable } from './idempotency.sql.js';
import { tableNames } from './table-names.js';

/** The statements of `ctx.step()`: both fenced by the claim's token, like every write of a run. */
export function buildRecoveryPointStatements(tableName: string) {
  const { records: t, steps } = tableNames(tableName, quoteTable);
  const suffix = createHash('sha1').update(tableName).digest('hex').slice(0, 8);
  const owned = `k.id = $1 AND k.owner_token = $2 AND k.status = 'in_progress'`;
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

export type RecoveryPointStatements = ReturnType<typeof buildRecoveryPointStatements>;
