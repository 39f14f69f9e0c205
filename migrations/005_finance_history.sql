-- nestjs-pg-idempotency: daily roll-up of deleted rows and refusals per record, for stable daily figures (generated from migrations/*.sql.ts; do not edit)

-- Safe to run more than once.

CREATE TABLE IF NOT EXISTS idempotency_keys_daily_rollup (
  day         date         NOT NULL,
  kind        varchar(20)  NOT NULL,
  endpoint    varchar(255) NOT NULL DEFAULT '',
  status_code smallint     NOT NULL DEFAULT 0,
  n           bigint       NOT NULL,
  PRIMARY KEY (day, kind, endpoint, status_code)
);

CREATE TABLE IF NOT EXISTS idempotency_keys_refusals (
  id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  record_id        uuid,
  kind             varchar(20) NOT NULL
                   CONSTRAINT idempotency_keys_refusals_kind_check CHECK (kind IN ('in_progress', 'mismatch', 'not_replayable')),
  refusal_count    integer     NOT NULL CHECK (refusal_count > 0),
  first_refused_at timestamptz NOT NULL,
  refused_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL
);

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_refusals_record_id ON idempotency_keys_refusals (record_id);

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_refusals_refused_at ON idempotency_keys_refusals (refused_at);

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_refusals_expires_at ON idempotency_keys_refusals (expires_at);

CREATE OR REPLACE VIEW idempotency_keys_conflicts AS
SELECT (r.refused_at AT TIME ZONE 'UTC')::date AS day, r.record_id, k.idempotency_key, k.endpoint, k.user_id, k.transaction_id,
       coalesce(sum(r.refusal_count) FILTER (WHERE r.kind = 'in_progress'), 0)::int AS conflicts,
       coalesce(sum(r.refusal_count) FILTER (WHERE r.kind = 'mismatch'), 0)::int AS mismatches,
       coalesce(sum(r.refusal_count) FILTER (WHERE r.kind = 'not_replayable'), 0)::int AS not_replayable,
       min(r.first_refused_at) AS first_refused_at, max(r.refused_at) AS last_refused_at
  FROM idempotency_keys_refusals r
  LEFT JOIN idempotency_keys_all k ON k.id = r.record_id
 GROUP BY 1, r.record_id, k.idempotency_key, k.endpoint, k.user_id, k.transaction_id;

CREATE OR REPLACE VIEW idempotency_keys_daily_summary AS
WITH events (day, kind, n) AS (
  SELECT (created_at AT TIME ZONE 'UTC')::date, 'created', 1 FROM idempotency_keys_all
  UNION ALL SELECT (completed_at AT TIME ZONE 'UTC')::date, 'completed', 1 FROM idempotency_keys_all WHERE completed_at IS NOT NULL
  UNION ALL SELECT (replayed_at AT TIME ZONE 'UTC')::date, 'replayed', replay_count FROM idempotency_keys_replays
  UNION ALL SELECT (expires_at AT TIME ZONE 'UTC')::date, 'expired', 1 FROM idempotency_keys_all WHERE expires_at <= now()
  UNION ALL SELECT (finished_at AT TIME ZONE 'UTC')::date, 'deleted', deleted FROM idempotency_keys_cleanup_runs
  UNION ALL SELECT day, kind, n FROM idempotency_keys_daily_rollup
)
SELECT day,
       coalesce(sum(n) FILTER (WHERE kind = 'created'), 0)::int   AS created,
       coalesce(sum(n) FILTER (WHERE kind = 'completed'), 0)::int AS completed,
       coalesce(sum(n) FILTER (WHERE kind = 'replayed'), 0)::int  AS replayed,
       coalesce(sum(n) FILTER (WHERE kind = 'expired'), 0)::int   AS expired,
       coalesce(sum(n) FILTER (WHERE kind = 'deleted'), 0)::int   AS deleted
  FROM events
 GROUP BY day;

CREATE OR REPLACE VIEW idempotency_keys_conflicts_daily AS
WITH events (day, kind, n) AS (
  SELECT (refused_at AT TIME ZONE 'UTC')::date, kind, refusal_count::bigint FROM idempotency_keys_refusals
  UNION ALL SELECT day, kind, n FROM idempotency_keys_daily_rollup WHERE kind IN ('in_progress', 'mismatch', 'not_replayable')
)
SELECT day,
       coalesce(sum(n) FILTER (WHERE kind = 'in_progress'), 0)::int AS conflicts,
       coalesce(sum(n) FILTER (WHERE kind = 'mismatch'), 0)::int AS mismatches,
       coalesce(sum(n) FILTER (WHERE kind = 'not_replayable'), 0)::int AS not_replayable
  FROM events
 GROUP BY day;

CREATE OR REPLACE VIEW idempotency_keys_failures_daily AS
SELECT day, endpoint, status_code, sum(records)::int AS records
  FROM (SELECT (completed_at AT TIME ZONE 'UTC')::date AS day, endpoint, status_code, count(*) AS records
          FROM idempotency_keys_all
         WHERE status = 'completed' AND status_code >= 400
         GROUP BY 1, 2, 3
        UNION ALL
        SELECT day, endpoint, status_code, n FROM idempotency_keys_daily_rollup WHERE kind = 'failed') f
 GROUP BY 1, 2, 3;

