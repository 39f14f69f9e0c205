import { idempotencyAuditUp, replayViews, sqlNames } from './idempotency-audit.sql.js';

const utcDay = (column: string) => `(${column} AT TIME ZONE 'UTC')::date`;

/** Refusal kinds (`<table>_refusals.kind`), by the view column that counts them. */
const REFUSALS = {
  conflicts: 'in_progress',
  mismatches: 'mismatch',
  not_replayable: 'not_replayable',
};
const REFUSAL_KINDS = Object.values(REFUSALS).map((kind) => `'${kind}'`);
const sumOf = (name: string, kind = name, n = 'n', kindColumn = 'kind') =>
  `coalesce(sum(${n}) FILTER (WHERE ${kindColumn} = '${kind}'), 0)::int AS ${name}`;
const refusalColumns = (n?: string, kindColumn?: string) =>
  Object.entries(REFUSALS)
    .map(([name, kind]) => sumOf(name, kind, n, kindColumn))
    .join(',\n       ');

/**
 * History finance can rely on. `<table>_daily_rollup`: cleanup adds the daily figures of the rows
 * it deletes, in the statement that deletes them, so the daily views (live rows + roll-up) report
 * the same figures for a day before and after its rows are deleted. `<table>_refusals`: in-progress
 * conflicts (409), key-reuse mismatches and answers without a replayable body, counted per record
 * and audit flush like replays, shown per record and day in `<table>_conflicts` and per day in
 * `<table>_conflicts_daily`.
 */
export function financeHistoryUp(tableName = 'idempotency_keys'): string[] {
  const { rollup, refusals, views, prefix: n } = sqlNames(tableName);
  return [
    `CREATE TABLE IF NOT EXISTS ${rollup} (
  day         date         NOT NULL,
  kind        varchar(20)  NOT NULL,
  endpoint    varchar(255) NOT NULL DEFAULT '',
  status_code smallint     NOT NULL DEFAULT 0,
  n           bigint       NOT NULL,
  PRIMARY KEY (day, kind, endpoint, status_code)
)`,
    `CREATE TABLE IF NOT EXISTS ${refusals} (
  id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  record_id        uuid,
  kind             varchar(20) NOT NULL
                   CONSTRAINT ${n}_refusals_kind_check CHECK (kind IN (${REFUSAL_KINDS.join(', ')})),
  refusal_count    integer     NOT NULL CHECK (refusal_count > 0),
  first_refused_at timestamptz NOT NULL,
  refused_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL
)`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_refusals_record_id ON ${refusals} (record_id)`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_refusals_refused_at ON ${refusals} (refused_at)`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_refusals_expires_at ON ${refusals} (expires_at)`,
    `CREATE OR REPLACE VIEW ${views.conflicts} AS
SELECT ${utcDay('r.refused_at')} AS day, r.record_id, k.idempotency_key, k.endpoint, k.user_id, k.transaction_id,
       ${refusalColumns('r.refusal_count', 'r.kind')},
       min(r.first_refused_at) AS first_refused_at, max(r.refused_at) AS last_refused_at
  FROM ${refusals} r
  LEFT JOIN ${views.all} k ON k.id = r.record_id
 GROUP BY 1, r.record_id, k.idempotency_key, k.endpoint, k.user_id, k.transaction_id`,
    dailySummary(tableName),
    `CREATE OR REPLACE VIEW ${views.conflictsDaily} AS
WITH events (day, kind, n) AS (
  SELECT ${utcDay('refused_at')}, kind, refusal_count::bigint FROM ${refusals}
  UNION ALL SELECT day, kind, n FROM ${rollup} WHERE kind IN (${REFUSAL_KINDS.join(', ')})
)
SELECT day,
       ${refusalColumns()}
  FROM events
 GROUP BY day`,
    `CREATE OR REPLACE VIEW ${views.failuresDaily} AS
SELECT day, endpoint, status_code, sum(records)::int AS records
  FROM (SELECT ${utcDay('completed_at')} AS day, endpoint, status_code, count(*) AS records
          FROM ${views.all}
         WHERE status = 'completed' AND status_code >= 400
         GROUP BY 1, 2, 3
        UNION ALL
        SELECT day, endpoint, status_code, n FROM ${rollup} WHERE kind = 'failed') f
 GROUP BY 1, 2, 3`,
  ];
}

/** Migration 4's summary plus the roll-up, with the same columns (migrations 2 and 4 may run again). */
function dailySummary(tableName: string): string {
  const { rollup } = sqlNames(tableName);
  const live = replayViews(tableName, true).dailySummary;
  const withRollup = live.replace(
    /\n\)\nSELECT day,/,
    `\n  UNION ALL SELECT day, kind, n FROM ${rollup}\n)\nSELECT day,`,
  );
  if (withRollup === live) throw new Error('daily summary: no events list to add the roll-up to');
  return withRollup;
}

export const FINANCE_HISTORY_UP = financeHistoryUp();

/**
 * Back to migration 4's views, then the tables go: the figures of rows already deleted go with
 * the roll-up.
 */
export function financeHistoryDown(tableName = 'idempotency_keys'): string[] {
  const { rollup, refusals, views } = sqlNames(tableName);
  // Migration 2's statement for this view, unchanged by migrations 3 and 4.
  const failuresDaily = idempotencyAuditUp(tableName).find((s) =>
    s.startsWith(`CREATE OR REPLACE VIEW ${views.failuresDaily} `),
  ) as string;
  return [
    `DROP VIEW IF EXISTS ${views.conflictsDaily}`,
    `DROP VIEW IF EXISTS ${views.conflicts}`,
    replayViews(tableName, true).dailySummary,
    failuresDaily,
    `DROP TABLE IF EXISTS ${refusals}`,
    `DROP TABLE IF EXISTS ${rollup}`,
  ];
}

export const FINANCE_HISTORY_DOWN = financeHistoryDown();
