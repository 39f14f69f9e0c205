import { quoteTable } from '../lib/store/postgres/idempotency.sql.js';
import { tableNames } from '../lib/store/postgres/table-names.js';

/** `idempotency_keys` stays unquoted so the generated .sql file reads naturally. */
export function sqlNames(tableName: string) {
  return tableNames(tableName, tableName === 'idempotency_keys' ? undefined : quoteTable);
}

/**
 * The audit trail around the records table: archived records (a stale key taken over keeps its
 * old record here), replay events, cleanup runs, and the reconciliation views finance queries.
 * Names derive from the records table: `idempotency_keys_archive`, `idempotency_keys_replays`, ...
 * Days in the views are UTC days.
 */
export function idempotencyAuditUp(tableName = 'idempotency_keys'): string[] {
  const { records: t, archive, replays, cleanupRuns, views, prefix: n } = sqlNames(tableName);
  const listColumns = `id, idempotency_key, endpoint, user_id, status, status_code, transaction_id,
       replay_count, last_replayed_at, created_at, completed_at, expires_at, locked_until`;
  return [
    // The same columns as the records table, by construction (no defaults, no scope constraint).
    `CREATE TABLE IF NOT EXISTS ${archive} (
  LIKE ${t},
  archived_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (id)
)`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_archive_expires_at ON ${archive} (expires_at)`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_archive_transaction_id ON ${archive} (transaction_id) WHERE transaction_id IS NOT NULL`,
    `CREATE TABLE IF NOT EXISTS ${replays} (
  id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  record_id   uuid        NOT NULL,
  replayed_at timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL
)`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_replays_record_id ON ${replays} (record_id)`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_replays_replayed_at ON ${replays} (replayed_at)`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_replays_expires_at ON ${replays} (expires_at)`,
    `CREATE TABLE IF NOT EXISTS ${cleanupRuns} (
  id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  started_at  timestamptz NOT NULL,
  finished_at timestamptz NOT NULL DEFAULT now(),
  deleted     integer     NOT NULL,
  batches     integer     NOT NULL
)`,
    `CREATE OR REPLACE VIEW ${views.all} AS
SELECT ${listColumns}, NULL::timestamptz AS archived_at FROM ${t}
UNION ALL
SELECT ${listColumns}, archived_at FROM ${archive}`,
    replayViews(tableName, false).deduplications,
    `CREATE OR REPLACE VIEW ${views.stuckClaims} AS
SELECT id, idempotency_key, endpoint, user_id, created_at, locked_until, now() - locked_until AS stuck_for
  FROM ${t}
 WHERE status = 'in_progress' AND locked_until < now()`,
    `CREATE OR REPLACE VIEW ${views.failuresDaily} AS
SELECT ${utcDay('completed_at')} AS day, endpoint, status_code, count(*)::int AS records
  FROM ${views.all}
 WHERE status = 'completed' AND status_code >= 400
 GROUP BY 1, 2, 3`,
    replayViews(tableName, false).dailySummary,
  ];
}

const utcDay = (column: string) => `(${column} AT TIME ZONE 'UTC')::date`;

/**
 * The two views that read replay rows. `tallied` (migration 4): a row stands for `replay_count`
 * replays of one record in one flush, within one UTC day; rows written before it count one
 * (`first_replayed_at` NULL: the row's own time).
 */
export function replayViews(tableName: string, tallied: boolean) {
  const { replays, cleanupRuns, views } = sqlNames(tableName);
  const replays_ = tallied ? 'sum(r.replay_count)::int' : 'count(*)::int';
  const first = tallied
    ? 'min(coalesce(r.first_replayed_at, r.replayed_at))'
    : 'min(r.replayed_at)';
  const perRow = tallied ? 'replay_count' : '1';
  return {
    deduplications: `CREATE OR REPLACE VIEW ${views.deduplications} AS
SELECT ${utcDay('r.replayed_at')} AS day, k.id AS record_id, k.idempotency_key, k.endpoint, k.user_id,
       k.transaction_id, k.status_code, ${replays_} AS replays,
       ${first} AS first_replayed_at, max(r.replayed_at) AS last_replayed_at
  FROM ${replays} r
  JOIN ${views.all} k ON k.id = r.record_id
 GROUP BY 1, k.id, k.idempotency_key, k.endpoint, k.user_id, k.transaction_id, k.status_code`,
    dailySummary: `CREATE OR REPLACE VIEW ${views.dailySummary} AS
WITH events (day, kind, n) AS (
  SELECT ${utcDay('created_at')}, 'created', 1 FROM ${views.all}
  UNION ALL SELECT ${utcDay('completed_at')}, 'completed', 1 FROM ${views.all} WHERE completed_at IS NOT NULL
  UNION ALL SELECT ${utcDay('replayed_at')}, 'replayed', ${perRow} FROM ${replays}
  UNION ALL SELECT ${utcDay('expires_at')}, 'expired', 1 FROM ${views.all} WHERE expires_at <= now()
  UNION ALL SELECT ${utcDay('finished_at')}, 'deleted', deleted FROM ${cleanupRuns}
)
SELECT day,
       coalesce(sum(n) FILTER (WHERE kind = 'created'), 0)::int   AS created,
       coalesce(sum(n) FILTER (WHERE kind = 'completed'), 0)::int AS completed,
       coalesce(sum(n) FILTER (WHERE kind = 'replayed'), 0)::int  AS replayed,
       coalesce(sum(n) FILTER (WHERE kind = 'expired'), 0)::int   AS expired,
       coalesce(sum(n) FILTER (WHERE kind = 'deleted'), 0)::int   AS deleted
  FROM events
 GROUP BY day`,
  };
}

export const IDEMPOTENCY_AUDIT_UP = idempotencyAuditUp();

/** Drops what `idempotencyAuditUp(tableName)` created, views first. */
export function idempotencyAuditDown(tableName = 'idempotency_keys'): string[] {
  const { archive, replays, cleanupRuns, views } = sqlNames(tableName);
  return [
    `DROP VIEW IF EXISTS ${views.dailySummary}`,
    `DROP VIEW IF EXISTS ${views.failuresDaily}`,
    `DROP VIEW IF EXISTS ${views.stuckClaims}`,
    `DROP VIEW IF EXISTS ${views.deduplications}`,
    `DROP VIEW IF EXISTS ${views.all}`,
    `DROP TABLE IF EXISTS ${cleanupRuns}`,
    `DROP TABLE IF EXISTS ${replays}`,
    `DROP TABLE IF EXISTS ${archive}`,
  ];
}

export const IDEMPOTENCY_AUDIT_DOWN = idempotencyAuditDown();
