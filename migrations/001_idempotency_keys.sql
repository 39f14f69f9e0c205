-- nestjs-pg-idempotency: idempotency_keys (generated from migrations/*.sql.ts; do not edit)

-- Safe to run more than once.

CREATE TABLE IF NOT EXISTS idempotency_keys (
  id               uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
  idempotency_key  varchar(255) NOT NULL,
  endpoint         varchar(255) NOT NULL,
  user_id          text         NOT NULL DEFAULT '',
  request_hash     char(64)     NOT NULL,
  status           varchar(20)  NOT NULL DEFAULT 'in_progress'
                   CONSTRAINT idempotency_keys_status_check CHECK (status IN ('in_progress', 'completed')),
  owner_token      uuid,
  locked_until     timestamptz,
  status_code      smallint,
  response_headers jsonb,
  response_body    jsonb,
  response_raw     bytea,
  transaction_id   varchar(255),
  replay_count     integer      NOT NULL DEFAULT 0,
  last_replayed_at timestamptz,
  created_at       timestamptz  NOT NULL DEFAULT now(),
  completed_at     timestamptz,
  expires_at       timestamptz  NOT NULL DEFAULT now() + interval '24 hours',
  CONSTRAINT uq_idempotency_keys_scope UNIQUE (idempotency_key, endpoint, user_id)
);

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_expires_at ON idempotency_keys (expires_at);

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_created_at ON idempotency_keys (created_at);

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_transaction_id ON idempotency_keys (transaction_id) WHERE transaction_id IS NOT NULL;

CREATE INDEX IF NOT EXISTS idx_idempotency_keys_in_progress ON idempotency_keys (locked_until) WHERE status = 'in_progress';

COMMENT ON TABLE idempotency_keys IS 'nestjs-pg-idempotency: one row per (idempotency_key, endpoint, user_id); audit trail of deduplicated operations';

