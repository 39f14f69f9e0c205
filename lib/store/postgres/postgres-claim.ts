import { randomUUID } from 'node:crypto';
import type { ClaimOutcome, ClaimRequest } from '../../interfaces/idempotency-store.interface.js';
import { telemetry } from '../../telemetry/idempotency.telemetry.js';
import { underContention } from './claim-contention.js';
import type { IdempotencyStatements } from './idempotency.sql.js';
import type { DeadlinePool } from './deadline-pool.js';
import { bound } from './pg-deadline.js';
import { scopeLockKey } from './scope-lock.js';
import {
  claimedScope,
  type ExistingRow,
  existingOutcome,
  refusing,
  takeover,
} from './scope-row.js';
import type { StoredResponseCodec } from './stored-response.codec.js';

/** Rounds of claim → conflicting row vanished / takeover lost; each round is one more statement. */
const MAX_CLAIM_ROUNDS = 5;

export interface ClaimStatements {
  pool: DeadlinePool;
  sql: IdempotencyStatements;
  tableName: string;
  codec: StoredResponseCodec;
}

/**
 * Claims `req`'s scope with `INSERT … ON CONFLICT DO NOTHING` (one round trip), reading the
 * conflicting row instead when there is one, and taking over a stale one.
 */
export async function claimScope(
  { pool, sql, tableName, codec }: ClaimStatements,
  req: ClaimRequest,
): Promise<ClaimOutcome> {
  const token = randomUUID();
  const scope = [req.key, req.endpoint, req.userId, req.requestHash];
  const claimed = claimedScope(req);
  let insert = true;
  let lockedStale: string | undefined;
  for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
    const result = await underContention(() =>
      insert
        ? pool.query(
            bound(sql.claim, [
              ...scope,
              token,
              req.leaseSeconds,
              req.ttlSeconds,
              scopeLockKey(tableName, req),
            ]),
          )
        : pool.query(bound(sql.existing, scope)),
    );
    if (result === 'busy') return { type: 'in_progress' };
    if (result === 'reread') {
      insert = false;
      continue;
    }
    const row = result.rows[0] as unknown as ExistingRow | undefined;
    // No row after an insert: the conflicting row was committed after this statement's
    // snapshot, so read it. No row after a read: it was deleted since, so insert again.
    insert = !insert;
    // Nothing inserted because a single-commit transaction holds the scope.
    if (row && !row.id && !row.locked) return { type: 'in_progress' };
    if (!row?.id) continue;
    if (row.claimed) return { type: 'claimed', lease: { id: row.id, token, claimed, run: 1 } };
    // Stale but skipped by the takeover: a live transaction holds it (see `lockClaim`).
    if (row.stale && (row.id === lockedStale || !row.locked)) {
      return { type: 'in_progress', ...refusing(row) };
    }
    if (row.stale) {
      const taken = await underContention(() => pool.query(takeover(sql, row.id, req, token)));
      if (taken === 'busy') return { type: 'in_progress' };
      if (taken === 'reread') {
        insert = false;
        continue;
      }
      const id = taken.rows[0]?.id as string | undefined;
      if (id) telemetry.leaseTakenOver();
      if (id)
        return {
          type: 'claimed',
          lease: { id, token, claimed, run: taken.rows[0].runs as number },
        };
      lockedStale = row.id;
      insert = false;
      continue;
    }
    return existingOutcome(row, claimed, codec);
  }
  throw new Error('nestjs-pg-idempotency: claim did not settle; too much contention on one key');
}
