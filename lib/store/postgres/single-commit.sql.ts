import { COMPLETED_RETURNING, existingColumns, quoteTable } from './idempotency.sql.js';
import { tableNames, statementSuffix } from './table-names.js';

/**
 * The statements of a single-commit transaction (`transactional: 'single'`), besides BEGIN and
 * COMMIT: one lookup under the scope's advisory lock, and one INSERT of the record already
 * completed, so the row is written once, at the end, in the handler's transaction.
 */
export function buildSingleCommitStatements(tableName: string) {
  const { records: t } = tableNames(tableName, quoteTable);
  const suffix = statementSuffix(tableName);
  return {
    /**
     * The scope's advisory lock, in its own statement before the lookup: under READ COMMITTED the
     * lookup's snapshot is then taken after the lock, so it sees the record of whoever held the
     * lock before us (a commit is visible before its locks are released). `snapshot_held`: under
     * REPEATABLE READ or SERIALIZABLE this statement took the transaction's snapshot when it
     * started, before the lock, so the lookup may miss a commit of the last holder; the store
     * then probes the scope's unique index (`probe`). `read_only`: the record could not be
     * written at the end, so the handler must not run. `pid` and `xact_started` (the
     * transaction's start, µs since the epoch) name the backend and this transaction on it, for
     * `terminate`: behind a transaction pooler the client's `processID` is the pooler's, not the
     * backend's, which stays the transaction's while it is open.
     */
    lock: {
      name: `idem_single_lock_${suffix}`,
      text: `SELECT pg_try_advisory_xact_lock($1) AS locked,
       current_setting('transaction_isolation') <> 'read committed' AS snapshot_held,
       current_setting('transaction_read_only') = 'on' AS read_only,
       pg_backend_pid() AS pid, (extract(epoch FROM now()) * 1000000)::int8 AS xact_started`,
    },
    /** Always one row: the committed row of the scope, if any (id NULL when none). */
    lookup: {
      name: `idem_single_lookup_${suffix}`,
      text: `${existingColumns('k')}
  FROM (SELECT 1) one
  LEFT JOIN ${t} k ON k.idempotency_key = $1 AND k.endpoint = $2 AND k.user_id = $3`,
    },
    /**
     * Run between a savepoint and its rollback, never kept: under REPEATABLE READ or
     * SERIALIZABLE it fails with 40001 when a record of the scope was committed after the
     * transaction's snapshot (the unique index sees rows the snapshot does not).
     */
    probe: {
      name: `idem_single_probe_${suffix}`,
      text: `INSERT INTO ${t} (idempotency_key, endpoint, user_id, request_hash)
VALUES ($1, $2, $3, $4)
ON CONFLICT (idempotency_key, endpoint, user_id) DO NOTHING`,
    },
    /**
     * The record, completed, sent with the COMMIT. Should a record of the scope exist anyway
     * (written by something that ignores the lock), the unique violation aborts the transaction,
     * so the COMMIT behind it rolls back: no ON CONFLICT here on purpose.
     */
    insertCompleted: {
      name: `idem_single_insert_${suffix}`,
      text: `INSERT INTO ${t} (id, idempotency_key, endpoint, user_id, request_hash, status,
       status_code, response_headers, response_raw, response_body, transaction_id,
       completed_at, expires_at, response_key_id, response_digest)
VALUES ($1, $2, $3, $4, $5, 'completed', $6, $7, $8, $9::jsonb, $10, clock_timestamp(),
        clock_timestamp() + make_interval(secs => $11), $12, $13)
${COMPLETED_RETURNING}`,
    },
    /**
     * Ends the backend of a transaction aborted while running a statement: its locks go now. Only
     * while that transaction ($1, $2: `pid`, `xact_started` of `lock`) is still open on it: once
     * it ended, a pooler may have handed the backend to another client, whose session must live.
     */
    terminate: {
      text: `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
 WHERE pid = $1 AND (extract(epoch FROM xact_start) * 1000000)::int8 = $2`,
    },
  };
}

export type SingleCommitStatements = ReturnType<typeof buildSingleCommitStatements>;
