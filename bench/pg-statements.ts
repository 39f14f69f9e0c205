/**
 * A first call's statements as the store sends them (`module`, with the store's bind values) and
 * as the raw floor does (`raw`), and the claim's shapes that `bench:pg-levers` (part 4) and
 * `bench:pg-instructions` compare. One definition, so both tools measure the same statements.
 */
import { createHash, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { IDEMPOTENCY_DEFAULTS } from '../lib/idempotency.defaults.js';
import { buildStatements, staleExpr } from '../lib/store/postgres/idempotency.sql.js';
import { bound } from '../lib/store/postgres/pg-deadline.js';
import { scopeLockKey } from '../lib/store/postgres/scope-lock.js';
import * as raw from './variants/raw-statements.js';

export const TABLE = 'idempotency_keys';
export const SQL = buildStatements(TABLE);

/** The store's claim: its statement and bind values (scope, hash, token, lease, TTL, lock key). */
export function claim(key: string) {
  const scope = { key, endpoint: 'POST /payments', userId: 'user-1' };
  const hash = createHash('sha256').update(key).digest('hex');
  const { leaseSeconds, ttlSeconds } = IDEMPOTENCY_DEFAULTS;
  const lock = scopeLockKey(TABLE, scope);
  return bound(SQL.claim, [key, scope.endpoint, scope.userId, hash, randomUUID(), leaseSeconds, ttlSeconds, lock]); // prettier-ignore
}

const insertPart = SQL.claim.text.split('\nSELECT id, true AS claimed')[0];

/**
 * The claim's shapes: the store's, without its conflicting-row read, the insert alone, and one
 * row whatever happened (the read a lateral join gated by `ins.id IS NULL`, no `UNION ALL`).
 */
export const SHAPES = {
  store: SQL.claim.text,
  'one-row': `${insertPart}
SELECT coalesce(ins.id, k.id) AS id, ins.id IS NOT NULL AS claimed, lock.locked AS locked,
       k.status, coalesce(ins.id IS NOT NULL OR k.request_hash = $4, false) AS same_request,
       coalesce(${staleExpr('k')}, false) AS stale, k.status_code, floor(extract(epoch FROM k.expires_at) * 1000)::float8 AS expires_ms,
       extract(epoch FROM k.expires_at - now())::float8 AS seconds_left,
       CASE WHEN k.request_hash = $4 THEN k.response_headers END AS response_headers,
       CASE WHEN k.request_hash = $4 THEN k.response_raw END AS response_raw,
       CASE WHEN k.request_hash = $4 THEN k.response_key_id END AS response_key_id,
       k.response_digest IS NOT NULL AS digested
  FROM lock LEFT JOIN ins ON true
  LEFT JOIN LATERAL (SELECT * FROM ${TABLE} k
     WHERE ins.id IS NULL AND k.idempotency_key = $1 AND k.endpoint = $2 AND k.user_id = $3) k ON true`,
  'no-read': `${insertPart}\nSELECT id FROM ins`,
  'insert-alone': `${insertPart}\nSELECT id FROM ins`.replace(
    'pg_try_advisory_xact_lock($8)',
    '$8::bigint IS NOT NULL',
  ),
};
export type Shape = keyof typeof SHAPES;

/** The claim in one of its shapes (a named statement per shape). */
export function shapedClaim(shape: Shape, key: string) {
  const q = claim(key);
  return shape === 'store' ? q : { ...q, name: `shape_${shape}`, text: SHAPES[shape] };
}

const BODY = JSON.stringify({ id: '1234567', amount: 100, status: 'succeeded' });
const HEADERS = { 'content-type': 'application/json; charset=utf-8' };

/** One first call's statements, as the store sends them (`module`) or the raw floor does (`raw`). */
export async function firstCall(c: pg.Client, variant: 'module' | 'raw', key: string) {
  if (variant === 'raw') {
    const { rows } = await c.query({ ...raw.CLAIM, values: [key, 'POST /payments', key.padEnd(64, '0')] }); // prettier-ignore
    await c.query({ ...raw.COMPLETE, values: [rows[0].id, 201, Buffer.from(BODY)] });
    return;
  }
  const claimed = claim(key);
  const { rows } = await c.query(claimed);
  const [id, token] = [rows[0].id, claimed.values[4]];
  const { ttlSeconds } = IDEMPOTENCY_DEFAULTS;
  await c.query(bound(SQL.complete, [id, token, 201, HEADERS, Buffer.from(BODY), BODY, null, ttlSeconds, null, null])); // prettier-ignore
}

/** The raw floor's claim alone. */
export const rawClaim = (key: string) => ({
  ...raw.CLAIM,
  values: [key, 'POST /payments', key.padEnd(64, '0')],
});
