import { sqlNames } from './idempotency-audit.sql.js';

/**
 * Recovery points (`ctx.step()`): one row per completed step of a record in `<table>_steps`, its
 * JSON result (sealed like responses when encryption is on), and how often a later run of the
 * record resumed from it. `runs` on the record counts the runs it took: a takeover of an
 * abandoned run of the same request adds one and carries the steps over to the new record id.
 */
export function recoveryPointsUp(tableName = 'idempotency_keys'): string[] {
  const { records, steps, prefix: n } = sqlNames(tableName);
  return [
    `ALTER TABLE ${records} ADD COLUMN IF NOT EXISTS runs integer NOT NULL DEFAULT 1`,
    `CREATE TABLE IF NOT EXISTS ${steps} (
  record_id       uuid         NOT NULL,
  name            varchar(255) NOT NULL,
  result          bytea        NOT NULL,
  result_key_id   varchar(64),
  run             integer      NOT NULL,
  completed_at    timestamptz  NOT NULL DEFAULT now(),
  resumed_count   integer      NOT NULL DEFAULT 0,
  last_resumed_at timestamptz,
  CONSTRAINT pk_${n}_steps PRIMARY KEY (record_id, name)
)`,
  ];
}

export function recoveryPointsDown(tableName = 'idempotency_keys'): string[] {
  const { records, steps } = sqlNames(tableName);
  return [`DROP TABLE IF EXISTS ${steps}`, `ALTER TABLE ${records} DROP COLUMN IF EXISTS runs`];
}

export const RECOVERY_POINTS_UP = recoveryPointsUp();
export const RECOVERY_POINTS_DOWN = recoveryPointsDown();
