-- nestjs-pg-idempotency: reconciliation queries for finance.
--
--   psql "$DATABASE_URL" -f node_modules/nestjs-pg-idempotency/sql/reconciliation.sql
--
-- Each query starts at a `-- name:` line and takes no parameters. All but the last two run
-- unchanged; the last two (ledger_without_record, records_missing_from_ledger) are TEMPLATES that
-- read your ledger (a `payments (id, created_at)` table as shipped): edit them first, or `psql -f`
-- reports `relation "payments" does not exist` for them (the others still run). They read
-- the views of migrations 2 to 5 (migrations/002_idempotency_audit.sql to
-- migrations/005_finance_history.sql) under the default table name `idempotency_keys`; for another
-- `tableName`, replace the prefix. Days are UTC days; "closed" days are those before today (UTC).
--
-- What a closed day's figures guarantee:
--   * daily_report, failures_daily: final. Cleanup adds the figures of the rows it deletes to
--     idempotency_keys_daily_rollup in the statement that deletes them, so they never change.
--   * deduplications and conflicts per record: kept while the records are (ttlSeconds +
--     cleanup.retentionSeconds after completion, 400 days by default), then gone with them.
--   * Replay and refusal events are written once per replayAuditFlushMs (1 s by default): a crash
--     loses at most that window; a day closes for them once that interval has passed midnight.

-- name: daily_report
-- Per closed day: keys created, completed, replayed (deduplicated by a replay), expired, deleted
-- by cleanup; and requests refused: in progress (409), key reused with another request, and
-- answered without a replayable body. NULL: nothing of that kind that day.
SELECT day, s.created, s.completed, s.replayed, s.expired, s.deleted,
       c.conflicts, c.mismatches, c.not_replayable
  FROM idempotency_keys_daily_summary s
  FULL JOIN idempotency_keys_conflicts_daily c USING (day)
 WHERE day < (now() AT TIME ZONE 'UTC')::date
 ORDER BY day;

-- name: failures_daily
-- Stored business failures (4xx/5xx outcomes replayed to retries) per closed day and endpoint.
SELECT day, endpoint, status_code, records
  FROM idempotency_keys_failures_daily
 WHERE day < (now() AT TIME ZONE 'UTC')::date
 ORDER BY day, endpoint, status_code;

-- name: deduplications_yesterday
-- Every operation a retry was answered for yesterday, with the transaction it did not repeat.
SELECT day, transaction_id, user_id, endpoint, idempotency_key, status_code, replays,
       first_replayed_at, last_replayed_at
  FROM idempotency_keys_deduplications
 WHERE day = (now() AT TIME ZONE 'UTC')::date - 1
 ORDER BY transaction_id NULLS LAST, record_id;

-- name: conflicts_yesterday
-- Every record duplicates were refused for yesterday (record_id NULL: a single-commit claim that
-- had not committed its record yet).
SELECT day, record_id, transaction_id, user_id, endpoint, idempotency_key,
       conflicts, mismatches, not_replayable, first_refused_at, last_refused_at
  FROM idempotency_keys_conflicts
 WHERE day = (now() AT TIME ZONE 'UTC')::date - 1
 ORDER BY record_id NULLS FIRST;

-- name: stuck_claims
-- Claims in progress past their lease: a handler that died mid-operation. Check the ledger for
-- what it did; the key frees itself (the next retry takes it over).
SELECT id, idempotency_key, endpoint, user_id, created_at, locked_until, stuck_for
  FROM idempotency_keys_stuck_claims
 ORDER BY locked_until;

-- name: ledger_without_record
-- Template: EDIT the `ledger` CTE to read your ledger (its transaction id and when it was
-- written) and `endpoint IN (...)` to your routes. Lists ledger rows no completed record accounts
-- for (each may be a duplicate: look for another with the same user and amount), from 10 minutes
-- ago (requests still running) back to the retention (400 days by default).
WITH ledger (transaction_id, created_at) AS (
  SELECT id, created_at FROM payments
)
SELECT l.transaction_id, l.created_at
  FROM ledger l
 WHERE l.created_at < now() - interval '10 minutes'
   AND l.created_at >= now() - interval '400 days'
   AND NOT EXISTS (
         SELECT 1 FROM idempotency_keys_all k
          WHERE k.transaction_id = l.transaction_id AND k.status = 'completed'
            AND k.endpoint IN ('POST /payments'))
 ORDER BY l.created_at, l.transaction_id;

-- name: records_missing_from_ledger
-- Template: EDIT the `ledger` CTE and `endpoint IN (...)` as above. Completed records whose
-- transaction the ledger does not have (the client was told it happened), and successful (2xx)
-- records that name no transaction.
WITH ledger (transaction_id) AS (
  SELECT id FROM payments
)
SELECT k.id AS record_id, k.endpoint, k.user_id, k.idempotency_key, k.status_code,
       k.transaction_id, k.completed_at, k.archived_at IS NOT NULL AS archived,
       CASE WHEN k.transaction_id IS NULL THEN 'success_without_transaction_id'
            ELSE 'transaction_not_in_ledger' END AS problem
  FROM idempotency_keys_all k
 WHERE k.status = 'completed'
   AND k.endpoint IN ('POST /payments')
   AND CASE WHEN k.transaction_id IS NULL THEN k.status_code BETWEEN 200 AND 299
            ELSE NOT EXISTS (SELECT 1 FROM ledger l WHERE l.transaction_id = k.transaction_id) END
 ORDER BY k.completed_at, k.id;
