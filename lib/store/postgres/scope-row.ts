import type {
  ClaimOutcome,
  ClaimRequest,
  Lease,
} from '../../interfaces/idempotency-store.interface.js';
import type { IdempotencyStatements } from './idempotency.sql.js';
import { bound, type QueryConfig } from './pg-deadline.js';
import type { StoredResponseCodec, StoredRow } from './stored-response.codec.js';

/** A scope's row as the claim, the lookup and `peek` read it. */
export interface ExistingRow extends StoredRow {
  /** Empty (NULL) when the scope has no committed row: claim and single-commit lookup. */
  id: string;
  claimed: boolean;
  /** The scope's advisory lock was free: no single-commit transaction holds the scope. */
  locked: boolean;
  status: 'in_progress' | 'completed' | null;
  same_request: boolean;
  stale: boolean;
  /** Epoch milliseconds (see `EXPIRES_MS`). */
  expires_ms: number | null;
  seconds_left: number | null;
}

export type ClaimedScope = NonNullable<Lease['claimed']>;

/** What a lease records of the request that claimed it (the cipher binds stored bytes to it). */
export function claimedScope(req: ClaimRequest): ClaimedScope {
  return { key: req.key, endpoint: req.endpoint, userId: req.userId, requestHash: req.requestHash };
}

/** The statement taking over a stale record for `req` under a new `token`. */
export function takeover(
  sql: IdempotencyStatements,
  recordId: string,
  req: ClaimRequest,
  token: string,
): QueryConfig {
  const { requestHash, leaseSeconds, ttlSeconds } = req;
  return bound(sql.takeover, [recordId, requestHash, token, leaseSeconds, ttlSeconds]);
}

/** The record a refusal (in progress, mismatch) names, and when it expires. */
export function refusing(row: ExistingRow): { recordId: string; expiresAt: Date } {
  return { recordId: row.id, expiresAt: new Date(row.expires_ms as number) };
}

/** What a committed, live row of the scope answers: a mismatch, in progress, or its replay. */
export function existingOutcome(
  row: ExistingRow,
  claimed: ClaimedScope,
  codec: StoredResponseCodec,
): Exclude<ClaimOutcome, { type: 'claimed' }> {
  // Named fields, not a spread: the outcome keeps one object shape with its fields in the object.
  const { recordId, expiresAt } = refusing(row);
  if (!row.same_request) return { type: 'mismatch', recordId, expiresAt };
  if (row.status === 'in_progress') return { type: 'in_progress', recordId, expiresAt };
  return {
    type: 'completed',
    recordId,
    expiresAt,
    secondsLeft: row.seconds_left as number,
    response: codec.fromRow(row, claimed),
  };
}
