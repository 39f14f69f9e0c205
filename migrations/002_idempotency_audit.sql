-- nestjs-pg-idempotency: audit trail and reconciliation views (generated from migrations/*.sql.ts; do not edit)

-- Safe to run more than once.

CREATE TABLE IF NOT EXISTS idempotency_keys_archive (
  LIKE idempotency_keys,
  archived_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (id)
);

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_archive_expires_at ON idempotency_keys_archive (expires_at);

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_archive_transaction_id ON idempotency_keys_archive (transaction_id) WHERE transaction_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS idempotency_keys_replays (
  id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  record_id   uuid        NOT NULL,
  replayed_at timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_replays_record_id ON idempotency_keys_replays (record_id);

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_replays_replayed_at ON idempotency_keys_replays (replayed_at);

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_replays_expires_at ON idempotency_keys_replays (expires_at);

CREATE TABLE IF NOT EXISTS idempotency_keys_cleanup_runs (
  id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  started_at  timestamptz NOT NULL,
  finished_at timestamptz NOT NULL DEFAULT now(),
  deleted     integer     NOT NULL,
  batches     integer     NOT NULL
);

CREATE OR REPLACE VIEW idempotency_keys_all AS
SELECT id, idempotency_key, endpoint, user_id, status, status_code, transaction_id,
       replay_count, last_replayed_at, created_at, completed_at, expires_at, locked_until, NULL::timestamptz AS archived_at FROM idempotency_keys
UNION ALL
SELECT id, idempotency_key, endpoint, user_id, status, status_code, transaction_id,
       replay_count, last_replayed_at, created_at, completed_at, expires_at, locked_until, archived_at FROM idempotency_keys_archive;

CREATE OR REPLACE VIEW idempotency_keys_deduplications AS
SELECT (r.replayed_at AT TIME ZONE 'UTC')::date AS day, k.id AS record_id, k.idempotency_key, k.endpoint, k.user_id,
       k.transaction_id, k.status_code, count(*)::int AS replays,
       min(r.replayed_at) AS first_replayed_at, max(r.replayed_at) AS last_replayed_at
  FROM idempotency_keys_replays r
  JOIN idempotency_keys_all k ON k.id = r.record_id
 GROUP BY 1, k.id, k.idempotency_key, k.endpoint, k.user_id, k.transaction_id, k.status_code;

CREATE OR REPLACE VIEW idempotency_keys_stuck_claims AS
SELECT id, idempotency_key, endpoint, user_id, created_at, locked_until, now() - locked_until AS stuck_for
  FROM idempotency_keys
 WHERE status = 'in_progress' AND locked_until < now();

CREATE OR REPLACE VIEW idempotency_keys_failures_daily AS
SELECT (completed_at AT TIME ZONE 'UTC')::date AS day, endpoint, status_code, count(*)::int AS records
  FROM idempotency_keys_all
 WHERE status = 'completed' AND status_code >= 400
 GROUP BY 1, 2, 3;

CREATE OR REPLACE VIEW idempotency_keys_daily_summary AS
WITH events (day, kind, n) AS (
  SELECT (created_at AT TIME ZONE 'UTC')::date, 'created', 1 FROM idempotency_keys_all
  UNION ALL SELECT (completed_at AT TIME ZONE 'UTC')::date, 'completed', 1 FROM idempotency_keys_all WHERE completed_at IS NOT NULL
  UNION ALL SELECT (replayed_at AT TIME ZONE 'UTC')::date, 'replayed', 1 FROM idempotency_keys_replays
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

