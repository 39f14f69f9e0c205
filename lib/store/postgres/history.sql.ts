import { quoteTable } from './table-names.js';
import { tableNames } from './table-names.js';

const utcDay = (column: string) => `(g.${column} AT TIME ZONE 'UTC')::date`;

/**
 * A DELETE whose rows' daily figures go to the roll-up in the same statement (so no view ever
 * sees them in neither place); it answers `deleted`, the number of rows deleted. Each figure is
 * `(day, kind, endpoint, status_code, n)` over the deleted row `g`, with the views' UTC days.
 */
function rollingDelete(rollup: string, del: string, figures: string[]): string {
  return `WITH g AS (
  ${del}
), rolled AS (
  INSERT INTO ${rollup} AS r (day, kind, endpoint, status_code, n)
  SELECT e.day, e.kind, e.endpoint, e.status_code, sum(e.n)
    FROM g CROSS JOIN LATERAL (VALUES
      ${figures.join(',\n      ')}
    ) AS e(day, kind, endpoint, status_code, n)
   WHERE e.day IS NOT NULL
   GROUP BY 1, 2, 3, 4
  ON CONFLICT (day, kind, endpoint, status_code) DO UPDATE SET n = r.n + EXCLUDED.n
)
SELECT count(*)::int AS deleted FROM g`;
}

const figure = (day: string, kind: string, n = '1', endpoint = "''", status = '0') =>
  `(${day}, ${kind}::varchar, ${endpoint}::varchar, ${status}::smallint, ${n}::bigint)`;

/** What the daily views count of a record, live or archived. */
const RECORD_FIGURES = [
  figure(utcDay('created_at'), "'created'"),
  figure(utcDay('completed_at'), "'completed'"),
  figure(utcDay('expires_at'), "'expired'"),
  figure(
    `CASE WHEN g.status = 'completed' AND g.status_code >= 400 THEN ${utcDay('completed_at')} END`,
    "'failed'",
    '1',
    'g.endpoint',
    'g.status_code',
  ),
];
const RECORD_RETURNING =
  'RETURNING endpoint, status, status_code, created_at, completed_at, expires_at';

/**
 * The statements of the history finance reads: refusals written per record and flush, and
 * cleanup's ($1 batch size, $2 retention): one bounded batch per table, rows past `expires_at`
 * plus retention, never a running claim; each rolls its figures up as it deletes.
 */
export function buildHistoryStatements(tableName: string, suffix: string) {
  const names = tableNames(tableName, quoteTable);
  const { records: t, archive, replays, refusals, cleanupRuns, rollup } = names;
  const expired = (table: string) => `DELETE FROM ${table} WHERE id IN (
    SELECT id FROM ${table} WHERE expires_at < now() - make_interval(secs => $2)
     ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)`;
  return {
    cleanupBatches: [
      rollingDelete(
        rollup,
        `DELETE FROM ${t} WHERE id IN (
    SELECT id FROM ${t}
     WHERE expires_at < now() - make_interval(secs => $2)
       AND (status = 'completed' OR locked_until < now())
     ORDER BY expires_at
     LIMIT $1
     FOR UPDATE SKIP LOCKED)
  ${RECORD_RETURNING}`,
        RECORD_FIGURES,
      ),
      rollingDelete(rollup, `${expired(archive)}\n  ${RECORD_RETURNING}`, RECORD_FIGURES),
      rollingDelete(rollup, `${expired(replays)}\n  RETURNING replayed_at, replay_count`, [
        figure(utcDay('replayed_at'), "'replayed'", 'g.replay_count'),
      ]),
      rollingDelete(rollup, `${expired(refusals)}\n  RETURNING refused_at, kind, refusal_count`, [
        figure(utcDay('refused_at'), 'g.kind', 'g.refusal_count'),
      ]),
    ],
    /** One row per record, kind and audit flush; stamped like replays, with the database's clock. */
    recordRefusals: {
      name: `idem_refusals_${suffix}`,
      text: `INSERT INTO ${refusals} (record_id, kind, refusal_count, first_refused_at, refused_at, expires_at)
SELECT id, kind, n, date_trunc('milliseconds', now() - make_interval(secs => first_ms / 1000)),
       date_trunc('milliseconds', now() - make_interval(secs => last_ms / 1000)), expires
  FROM unnest($1::uuid[], $2::varchar[], $3::int[], $4::float8[], $5::float8[], $6::timestamptz[])
    AS e (id, kind, n, first_ms, last_ms, expires)`,
    },
    /** `now()` is when the run's transaction began, `clock_timestamp()` the end: the database's clock. */
    cleanupRun: `INSERT INTO ${cleanupRuns} (started_at, finished_at, deleted, batches)
VALUES (now(), clock_timestamp(), $1, $2)`,
    /** The run log is pruned too; its rows are few (one per run), so one statement. */
    cleanupOldRuns: rollingDelete(
      rollup,
      `DELETE FROM ${cleanupRuns} WHERE finished_at < now() - make_interval(secs => $1)
  RETURNING finished_at, deleted`,
      [figure(utcDay('finished_at'), "'deleted'", 'g.deleted')],
    ),
  };
}
