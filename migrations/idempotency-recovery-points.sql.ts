import { sqlNames } from './idempotency-audit.sql.js';

/**
 * Recovery points (`ctx.step()`): one row per completed step of a record in `<table>_steps`, its
 * JSON result (sealed like responses when encryption is on), and how often a later run of the
 * record resumed from it. `runs` on the record counts the runs it took: a takeover of an
 * abandoned run of the same request adds one and carries the steps over to the new record id.
 */
export function recoveryPointsUp(tableName = 'idempotency_keys'): string[] {
  const { records, steps, views, prefix: n } = sqlNames(tableName);
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
    // "Was the card charged once?": every record that took more than one run or has steps.
    `CREATE OR REPLACE VIEW ${views.recoveries} AS
SELECT k.id AS record_id, k.idempotency_key, k.endpoint, k.user_id, k.status, k.transaction_id,
       k.runs, s.steps, coalesce(s.step_names, '{}') AS step_names,
       coalesce(s.resumed_steps, '{}') AS resumed_steps
  FROM ${records} k
  CROSS JOIN LATERAL (
    SELECT count(*)::int AS steps,
           array_agg(name ORDER BY completed_at, name) AS step_names,
           array_agg(name ORDER BY completed_at, name) FILTER (WHERE resumed_count > 0) AS resumed_steps
      FROM ${steps} WHERE record_id = k.id
  ) s
 WHERE k.runs > 1 OR s.steps > 0`,
  ];
}

export function recoveryPointsDown(tableName = 'idempotency_keys'): string[] {
  const { records, steps, views } = sqlNames(tableName);
  return [
    `DROP VIEW IF EXISTS ${views.recoveries}`,
    `DROP TABLE IF EXISTS ${steps}`,
    `ALTER TABLE ${records} DROP COLUMN IF EXISTS runs`,
  ];
}

export const RECOVERY_POINTS_UP = recoveryPointsUp();
export const RECOVERY_POINTS_DOWN = recoveryPointsDown();
