import { buildHistoryStatements } from './history.sql.js';
import { RECORD_COLUMNS, quoteTable, tableNames, statementSuffix } from './table-names.js';

export { quoteTable };
import { orphanedStepsCleanup } from './recovery-points.sql.js';
import { ownedClaim } from './owned-claim.js';

/** A row is stale (free to take over) when completed past its TTL, or in progress past its lease. */
export const staleExpr = (alias: string) =>
  `CASE WHEN ${alias}.status = 'completed' THEN ${alias}.expires_at <= now() ELSE ${alias}.locked_until <= now() END`;

/**
 * A timestamp (a record's expiry, the cleanup's clock) as whole epoch milliseconds: a float8 the
 * driver parses with parseFloat, where a timestamptz would go through pg's date-string parser on
 * every claim and completion, or through whatever parser the app set for timestamptz (a string, a
 * dayjs) where a Date is needed.
 */
const EPOCH_MS = (expr: string, as: string) =>
  `floor(extract(epoch FROM ${expr}) * 1000)::float8 AS ${as}`;
const EXPIRES_MS = (k?: string) => EPOCH_MS(`${k ? `${k}.` : ''}expires_at`, 'expires_ms');

/** What a completion returns: its expiry, and the seconds left by the database's clock. */
export const COMPLETED_RETURNING = `RETURNING ${EXPIRES_MS()},
          extract(epoch FROM expires_at - clock_timestamp())::float8 AS seconds_left`;

/** What a claim reads of an existing row; `$4` is the request hash, the response only when it matches. */
export function existingColumns(k: string, locked = 'true'): string {
  return `SELECT ${k}.id, false AS claimed, ${locked} AS locked, ${k}.status,
       ${k}.request_hash = $4 AS same_request, ${staleExpr(k)} AS stale, ${k}.status_code,
       ${EXPIRES_MS(k)}, extract(epoch FROM ${k}.expires_at - now())::float8 AS seconds_left,
       CASE WHEN ${k}.request_hash = $4 THEN ${k}.response_headers END AS response_headers,
       CASE WHEN ${k}.request_hash = $4 THEN ${k}.response_raw END AS response_raw,
       CASE WHEN ${k}.request_hash = $4 THEN ${k}.response_key_id END AS response_key_id,
       ${k}.response_digest IS NOT NULL AS digested`;
}

/**
 * Every statement the store sends, built once per table. Values are always bind parameters;
 * only the validated table identifier is spliced in. Time comes from the database (`now()`, and
 * `clock_timestamp()` in statements that may run late inside a handler's transaction),
 * so every app instance agrees on leases and expiry.
 */
export function buildStatements(tableName: string) {
  const { records: t, archive, replays, cleanupRuns, steps } = tableNames(tableName, quoteTable);
  const recordColumns = RECORD_COLUMNS.join(', ');
  const suffix = statementSuffix(tableName);
  const history = buildHistoryStatements(tableName, suffix);
  const existing = `${existingColumns('k')}
  FROM ${t} k
 WHERE k.idempotency_key = $1 AND k.endpoint = $2 AND k.user_id = $3`;

  return {
    /**
     * Claim, and in the same round trip the existing row when the claim conflicts. The scope's
     * advisory lock ($8) is tried first: held, a single-commit transaction owns the scope and
     * nothing is inserted (`locked` false, the row if any still answers replays and mismatches).
     */
    claim: {
      name: `idem_claim_${suffix}`,
      text: `WITH lock AS (SELECT pg_try_advisory_xact_lock($8) AS locked), ins AS (
  INSERT INTO ${t} (idempotency_key, endpoint, user_id, request_hash, owner_token, locked_until, expires_at)
  SELECT $1::varchar, $2::varchar, $3::text, $4::bpchar, $5::uuid, now() + make_interval(secs => $6), now() + make_interval(secs => $7)
    FROM lock WHERE lock.locked
  ON CONFLICT (idempotency_key, endpoint, user_id) DO NOTHING
  RETURNING id
)
SELECT id, true AS claimed, true AS locked, NULL::varchar AS status, true AS same_request,
       false AS stale, NULL::smallint AS status_code, NULL::float8 AS expires_ms,
       NULL::float8 AS seconds_left, NULL::jsonb AS response_headers, NULL::bytea AS response_raw,
       NULL::varchar AS response_key_id, false AS digested
  FROM ins
UNION ALL
${existingColumns('k', 'lock.locked')}
  FROM lock LEFT JOIN ${t} k ON k.idempotency_key = $1 AND k.endpoint = $2 AND k.user_id = $3
 WHERE NOT EXISTS (SELECT 1 FROM ins)`,
    },
    /** Read of the conflicting row when it was committed after the claim's snapshot. */
    existing: {
      name: `idem_existing_${suffix}`,
      text: existing,
    },
    /** A replay-only request's read: the live row alone, nothing written and no lock taken. */
    peek: {
      name: `idem_peek_${suffix}`,
      text: `${existing} AND NOT (${staleExpr('k')})`,
    },
    /**
     * Atomic takeover of a stale row: only one of many concurrent callers matches. The old record
     * moves to the archive first (audit), and the new operation gets a new id. A row locked by a
     * live transactional handler is skipped: its transaction is proof of life. An abandoned run
     * of the same request is resumed: one more run, its recovery points carried to the new id.
     */
    takeover: {
      name: `idem_takeover_${suffix}`,
      text: `WITH old AS (
  SELECT * FROM ${t} k WHERE k.id = $1 AND ${staleExpr('k')} FOR UPDATE SKIP LOCKED
), archived AS (
  INSERT INTO ${archive} (${recordColumns})
  SELECT ${recordColumns} FROM old
), fresh AS (
  SELECT gen_random_uuid() AS id, old.status = 'in_progress' AND old.request_hash = $2 AS resumes
    FROM old
), carried AS (
  UPDATE ${steps} s SET record_id = fresh.id FROM old, fresh WHERE s.record_id = old.id AND fresh.resumes
)
UPDATE ${t} k
   SET id = fresh.id, runs = CASE WHEN fresh.resumes THEN old.runs + 1 ELSE 1 END,
       request_hash = $2, status = 'in_progress', owner_token = $3,
       locked_until = now() + make_interval(secs => $4), expires_at = now() + make_interval(secs => $5),
       created_at = now(), completed_at = NULL, status_code = NULL, response_headers = NULL,
       response_body = NULL, response_raw = NULL, response_key_id = NULL, response_digest = NULL,
       transaction_id = NULL, replay_count = 0, last_replayed_at = NULL
  FROM old, fresh
 WHERE k.id = old.id
RETURNING k.id, k.runs`,
    },
    /**
     * Appends one row per record replayed (with its count) and bumps the record's counters. The
     * stamps are the database's clock minus how long ago the app saw the replays (to the ms). The
     * expiry comes as epoch ms (int8): whole seconds, then the ms, exact for any date a Date holds
     * (`to_timestamp` of a float8 of ms / 1000 is not, past the year 2242).
     */
    recordReplays: {
      name: `idem_replays_${suffix}`,
      text: `WITH events AS (
  INSERT INTO ${replays} (record_id, replayed_at, expires_at, replay_count, first_replayed_at)
  SELECT id, date_trunc('milliseconds', now() - make_interval(secs => last_ms / 1000)),
         to_timestamp(expires_ms / 1000) + (expires_ms % 1000) * interval '1 millisecond', n,
         date_trunc('milliseconds', now() - make_interval(secs => first_ms / 1000))
    FROM unnest($1::uuid[], $2::float8[], $3::int8[], $4::int[], $5::float8[])
      AS e (id, last_ms, expires_ms, n, first_ms)
  RETURNING record_id, replayed_at, replay_count
), per_record AS (
  SELECT record_id, sum(replay_count)::int AS n, max(replayed_at) AS last FROM events GROUP BY record_id
)
UPDATE ${t} k
   SET replay_count = k.replay_count + p.n,
       last_replayed_at = GREATEST(k.last_replayed_at, p.last)
  FROM per_record p
 WHERE k.id = p.record_id`,
    },
    complete: {
      name: `idem_complete_${suffix}`,
      text: `UPDATE ${t}
   SET status = 'completed', status_code = $3, response_headers = $4, response_raw = $5,
       response_body = $6::jsonb, transaction_id = $7, completed_at = clock_timestamp(),
       locked_until = NULL, expires_at = clock_timestamp() + make_interval(secs => $8),
       response_key_id = $9, response_digest = $10
 WHERE ${ownedClaim()}
${COMPLETED_RETURNING}`,
    },
    /**
     * First statement of a transactional handler's transaction: the row lock keeps the claim
     * alive instead of lease renewals, which need another connection of the pool, and whose
     * updates would make the completion fail with a serialization error under REPEATABLE READ.
     */
    lockClaim: {
      name: `idem_lock_${suffix}`,
      text: `SELECT id FROM ${t} WHERE ${ownedClaim()} FOR UPDATE`,
    },
    release: {
      name: `idem_release_${suffix}`,
      text: `DELETE FROM ${t} WHERE ${ownedClaim()}`,
    },
    renew: {
      name: `idem_renew_${suffix}`,
      text: `UPDATE ${t} SET locked_until = clock_timestamp() + make_interval(secs => $3)
 WHERE ${ownedClaim()}`,
    },
    /**
     * Held until the run's transaction ends: a session lock and its unlock may reach different
     * server connections behind a transaction pooler, and a lock left on one outlives the run.
     */
    cleanupLock: `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS locked`,
    /**
     * For a skipped run: the database's time, and when the last run anyone recorded finished, as
     * epoch ms (Dates whatever timestamptz parser the app set).
     */
    cleanupLastRun: `SELECT ${EPOCH_MS('now()', 'checked_ms')},
       ${EPOCH_MS(`(SELECT max(finished_at) FROM ${cleanupRuns})`, 'last_run_ms')}`,
    ...history,
    cleanupBatches: [...history.cleanupBatches, orphanedStepsCleanup(tableName)],
  };
}

export type IdempotencyStatements = ReturnType<typeof buildStatements>;
