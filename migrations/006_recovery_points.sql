-- nestjs-pg-idempotency: recovery points of ctx.step() and the runs a record took (generated from migrations/*.sql.ts; do not edit)

-- Safe to run more than once.

ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS runs integer NOT NULL DEFAULT 1;

CREATE TABLE IF NOT EXISTS idempotency_keys_steps (
  record_id       uuid         NOT NULL,
  name            varchar(255) NOT NULL,
  result          bytea        NOT NULL,
  result_key_id   varchar(64),
  run             integer      NOT NULL,
  completed_at    timestamptz  NOT NULL DEFAULT now(),
  resumed_count   integer      NOT NULL DEFAULT 0,
  last_resumed_at timestamptz,
  CONSTRAINT pk_idempotency_keys_steps PRIMARY KEY (record_id, name)
);

CREATE OR REPLACE VIEW idempotency_keys_recoveries AS
SELECT k.id AS record_id, k.idempotency_key, k.endpoint, k.user_id, k.status, k.transaction_id,
       k.runs, s.steps, coalesce(s.step_names, '{}') AS step_names,
       coalesce(s.resumed_steps, '{}') AS resumed_steps
  FROM idempotency_keys k
  CROSS JOIN LATERAL (
    SELECT count(*)::int AS steps,
           array_agg(name ORDER BY completed_at, name) AS step_names,
           array_agg(name ORDER BY completed_at, name) FILTER (WHERE resumed_count > 0) AS resumed_steps
      FROM idempotency_keys_steps WHERE record_id = k.id
  ) s
 WHERE k.runs > 1 OR s.steps > 0;

