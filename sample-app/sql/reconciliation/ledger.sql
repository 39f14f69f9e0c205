-- Reconciliation: the payments ledger (payments, refunds) against the idempotency records.
--
--   psql "$DATABASE_URL" -f sample-app/sql/reconciliation/ledger.sql
--
-- Each query starts at a `-- name:` line and runs unchanged on its own (no parameters).
-- Both read idempotency_keys and idempotency_keys_archive: when an expired key is used again,
-- the library moves its old record to the archive, and that record still vouches for its payment.
--
-- Windows (match the sample's IdempotencyModule settings in src/app.module.ts):
--   * 10 minutes: a request still running may have written its payment but not yet completed its
--     record (only without transactional mode; with it both commit together). Records hold their
--     claim at most maxHoldSeconds (300 s) while the handler runs.
--   * 7 days: records are kept for ttlSeconds (24 h) + cleanup.retentionSeconds (7 d) after
--     completion, then cleanup deletes them; older payments cannot be checked against them.

-- name: payments_without_idempotency_record
-- Ledger rows that no completed idempotency record accounts for: written by a request whose
-- record was never completed (crash, lost lease, released key) or outside the API entirely.
-- Each one may be a duplicate charge: look for another payment with the same user and amount.
SELECT p.id AS payment_id,
       p.user_id,
       p.amount,
       p.currency,
       p.status,
       p.created_at
  FROM payments p
 WHERE p.created_at <  now() - interval '10 minutes'
   AND p.created_at >= now() - interval '7 days'
   AND NOT EXISTS (
         SELECT 1
           FROM idempotency_keys k
          WHERE k.transaction_id = p.id
            AND k.status = 'completed'
            AND k.endpoint = 'POST /payments')
   AND NOT EXISTS (
         SELECT 1
           FROM idempotency_keys_archive a
          WHERE a.transaction_id = p.id
            AND a.status = 'completed'
            AND a.endpoint = 'POST /payments')
 ORDER BY p.created_at, p.id;

-- name: idempotency_records_missing_from_ledger
-- Completed records on the payments/refunds endpoints whose transaction is not in the ledger
-- (payments ∪ refunds): the client was told the operation happened, the ledger does not have it.
-- Also lists successful (2xx) records that name no transaction at all. Records without a
-- transaction id for a refused request (e.g. 404 unknown payment) are expected and not listed.
WITH records AS (
  SELECT id, idempotency_key, endpoint, user_id, status, status_code, transaction_id, completed_at,
         false AS archived
    FROM idempotency_keys
  UNION ALL
  SELECT id, idempotency_key, endpoint, user_id, status, status_code, transaction_id, completed_at,
         true AS archived
    FROM idempotency_keys_archive
), ledger (transaction_id) AS (
  SELECT id FROM payments
  UNION ALL
  SELECT id FROM refunds
)
SELECT r.id AS record_id,
       r.endpoint,
       r.user_id,
       r.idempotency_key,
       r.status_code,
       r.transaction_id,
       r.completed_at,
       r.archived,
       CASE WHEN r.transaction_id IS NULL THEN 'success_without_transaction_id'
            ELSE 'transaction_not_in_ledger' END AS problem
  FROM records r
 WHERE r.status = 'completed'
   AND r.endpoint IN ('POST /payments', 'POST /payments/:id/refunds')
   AND CASE WHEN r.transaction_id IS NULL THEN r.status_code BETWEEN 200 AND 299
            ELSE NOT EXISTS (SELECT 1 FROM ledger l WHERE l.transaction_id = r.transaction_id) END
 ORDER BY r.completed_at, r.id;
