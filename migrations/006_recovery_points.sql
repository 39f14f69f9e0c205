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

