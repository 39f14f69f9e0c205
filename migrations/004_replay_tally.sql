-- nestjs-pg-idempotency: replay audit rows per record per flush, with a count (generated from migrations/*.sql.ts; do not edit)

-- Safe to run more than once.

DO $$
DECLARE
  part regclass;
BEGIN
  IF (SELECT relkind FROM pg_class WHERE oid = 'idempotency_keys'::regclass) <> 'p' THEN
    ALTER TABLE idempotency_keys SET (fillfactor = 90);
    RETURN;
  END IF;
  FOR part IN SELECT t.relid FROM pg_partition_tree('idempotency_keys'::regclass) t
                JOIN pg_class c ON c.oid = t.relid
               WHERE t.isleaf AND c.relkind = 'r' LOOP
    EXECUTE format('ALTER TABLE %s SET (fillfactor = 90)', part);
  END LOOP;
END
$$;

ALTER TABLE idempotency_keys_replays
  ADD COLUMN IF NOT EXISTS replay_count integer NOT NULL DEFAULT 1 CHECK (replay_count > 0),
  ADD COLUMN IF NOT EXISTS first_replayed_at timestamptz;

CREATE OR REPLACE VIEW idempotency_keys_deduplications AS
SELECT (r.replayed_at AT TIME ZONE 'UTC')::date AS day, k.id AS record_id, k.idempotency_key, k.endpoint, k.user_id,
       k.transaction_id, k.status_code, sum(r.replay_count)::int AS replays,
       min(coalesce(r.first_replayed_at, r.replayed_at)) AS first_replayed_at, max(r.replayed_at) AS last_replayed_at
  FROM idempotency_keys_replays r
  JOIN idempotency_keys_all k ON k.id = r.record_id
 GROUP BY 1, k.id, k.idempotency_key, k.endpoint, k.user_id, k.transaction_id, k.status_code;

CREATE OR REPLACE VIEW idempotency_keys_daily_summary AS
WITH events (day, kind, n) AS (
  SELECT (created_at AT TIME ZONE 'UTC')::date, 'created', 1 FROM idempotency_keys_all
  UNION ALL SELECT (completed_at AT TIME ZONE 'UTC')::date, 'completed', 1 FROM idempotency_keys_all WHERE completed_at IS NOT NULL
  UNION ALL SELECT (replayed_at AT TIME ZONE 'UTC')::date, 'replayed', replay_count FROM idempotency_keys_replays
  UNION ALL SELECT (expires_at AT TIME ZONE 'UTC')::date, 'expired', 1 FROM idempotency_keys_all WHERE expires_at <= now()
  UNION ALL SELECT (finished_at AT TIME ZONE 'UTC')::date, 'deleted', deleted FROM idempotency_keys_cleanup_runs
)
SELECT day,
       coalesce(sum(n) FILTER (WHERE kind = 'created'), 0)::int   AS created,
       coalesce(sum(n) FILTER (WHERE kind = 'completed'), 0)::int AS completed,
       coalesce(sum(n) FILTER (WHERE kind = 'replayed'), 0)::int  AS replayed,
       coalesce(sum(n) FILTER (WHERE kind = 'expired'), 0)::int   AS expired,
       coalesce(sum(n) FILTER (WHERE kind = 'deleted'), 0)::int   AS deleted
  FROM events
 GROUP BY day;

