-- nestjs-pg-idempotency: encrypted and digest-only responses (records and archive) (generated from migrations/*.sql.ts; do not edit)

-- Safe to run more than once.

ALTER TABLE idempotency_keys
  ADD COLUMN IF NOT EXISTS response_key_id varchar(64),
  ADD COLUMN IF NOT EXISTS response_digest char(64);

ALTER TABLE idempotency_keys_archive
  ADD COLUMN IF NOT EXISTS response_key_id varchar(64),
  ADD COLUMN IF NOT EXISTS response_digest char(64);

