import { createHash } from 'node:crypto';
import { existingColumns, quoteTable } from './idempotency.sql.js';
import { tableNames } from './table-names.js';

/**
 * The statements of a single-commit transaction (`transactional: 'single'`), besides BEGIN and
 * COMMIT: one lookup under the scope's advisory lock, and one INSERT of the record already
 * completed, so the row is written once, at the end, in the handler's transaction.
 */
export function buildSingleCommitStatements(tableName: string) {
  const { records: t } = tableNames(tableName, quoteTable);
  const suffix = createHash('sha1').update(tableName).digest('hex').slice(0, 8);
  return {
    /** Always one row: whether the lock ($5) was taken, and the committed row if any (id NULL when none). */
    lookup: {
      name: `idem_single_lookup_${suffix}`,
      text: `${existingColumns('k', 'lock.locked')}
  FROM (SELECT pg_try_advisory_xact_lock($5) AS locked) lock
  LEFT JOIN ${t} k ON k.idempotency_key = $1 AND k.endpoint = $2 AND k.user_id = $3`,
    },
    /**
     * The record, completed, sent with the COMMIT. A unique violation (a record of the scope was
     * committed after the lookup's snapshot, by a claimer that held the lock just before) aborts
     * the transaction, so the COMMIT behind it rolls back: no ON CONFLICT here on purpose.
     */
    insertCompleted: {
      name: `idem_single_insert_${suffix}`,
      text: `INSERT INTO ${t} (id, idempotency_key, endpoint, user_id, request_hash, status,
       status_code, response_headers, response_raw, response_body, transaction_id,
       completed_at, expires_at, response_key_id, response_digest)
VALUES ($1, $2, $3, $4, $5, 'completed', $6, $7, $8, $9::jsonb, $10, clock_timestamp(),
        clock_timestamp() + make_interval(secs => $11), $12, $13)
RETURNING expires_at, extract(epoch FROM expires_at - clock_timestamp())::float8 AS seconds_left`,
    },
  };
}

export type SingleCommitStatements = ReturnType<typeof buildSingleCommitStatements>;
