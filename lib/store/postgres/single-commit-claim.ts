import { randomUUID } from 'node:crypto';
import type {
  ClaimOutcome,
  ClaimRequest,
  Lease,
  TransactionalClaimOutcome,
} from '../../interfaces/idempotency-store.interface.js';
import type { TransactionClient } from '../../interfaces/transaction-adapter.interface.js';
import { underContention } from './claim-contention.js';
import type { ClaimStatements } from './postgres-claim.js';
import { pipelineWithin, settledValue } from './pg-pipeline.js';
import { bound, type QueryConfig, queryWithin } from './pg-deadline.js';
import { scopeLockKey } from './scope-lock.js';
import {
  claimedScope,
  type ClaimedScope,
  type ExistingRow,
  existingOutcome,
  refusing,
  takeover,
} from './scope-row.js';
import type { SingleCommitSlots } from './single-commit-slots.js';
import type { SingleCommitStatements } from './single-commit.sql.js';
import { type SingleCommit, singleCommitTransaction } from './single-commit-transaction.js';
import { committedAfterSnapshot, serializationFailure } from './snapshot-probe.js';
import { readOnlyTransactionError } from './topology-check.js';

export interface SingleCommitClaimDeps<TManager> extends ClaimStatements {
  single: SingleCommitStatements;
  slots: SingleCommitSlots;
  bind: (client: TransactionClient) => TManager;
  maxSeconds: number;
  /** A claim's transaction is open: `inserts` when the record is written only by the completion. */
  opened(lease: Lease, single: SingleCommit<TManager>, inserts: boolean): void;
}

/**
 * BEGIN, the scope's advisory lock and the lookup, in one round trip; then the transaction stays
 * open for the handler (claimed), or is rolled back in the background. `again`: claimed once
 * more in a new transaction, after the probe found a record committed after the first one's
 * snapshot (whose lookup shows it); refused again, it is SERIALIZABLE's own conflict check (503,
 * nothing ran).
 */
export async function claimInNewTransaction<TManager>(
  deps: SingleCommitClaimDeps<TManager>,
  req: ClaimRequest,
  again = false,
): Promise<TransactionalClaimOutcome<TManager>> {
  const { pool, single } = deps;
  const freeSlot = await deps.slots.acquire();
  let client: Awaited<ReturnType<typeof pool.connect>>;
  try {
    client = await pool.connect();
  } catch (err) {
    freeSlot();
    throw err;
  }
  const run = (config: QueryConfig) => queryWithin(client, config, pool.timeoutMs);
  let outcome: ClaimOutcome | undefined;
  let inserts: boolean;
  /** The transaction's backend (pid, start in µs), for its termination past the bound. */
  let backend: [number, string] | undefined;
  try {
    const scope = [req.key, req.endpoint, req.userId, req.requestHash];
    const [begin, lock, lookup] = await pipelineWithin(
      client,
      [
        { text: 'BEGIN', values: [] },
        bound(single.lock, [scopeLockKey(deps.tableName, req)]),
        bound(single.lookup, scope),
      ],
      pool.timeoutMs,
    );
    settledValue(begin);
    const locking = settledValue(lock).rows[0];
    if (locking?.read_only === true) throw readOnlyTransactionError();
    if (locking?.pid != null) backend = [locking.pid as number, locking.xact_started as string];
    const row = {
      ...(settledValue(lookup).rows[0] as unknown as ExistingRow),
      locked: locking?.locked === true,
    };
    // The snapshot predates the lock: the last holder may have committed between the two.
    const raced =
      row.locked &&
      (!row.id || row.stale) &&
      locking?.snapshot_held === true &&
      (await committedAfterSnapshot(client, bound(single.probe, scope), pool.timeoutMs));
    if (raced && again) throw serializationFailure();
    if (raced) await run({ text: 'ROLLBACK', values: [] });
    inserts = !raced && !row.id && row.locked;
    // Awaited only when it sends a statement (a takeover): a first claim decides at once.
    const decided = raced ? undefined : decideInTransaction(deps, req, row, run);
    outcome = decided instanceof Promise ? await decided : decided;
  } catch (err) {
    client.release(err as Error);
    freeSlot();
    throw err;
  }
  // No outcome: the probe found a race, and the transaction was rolled back.
  if (!outcome) {
    client.release();
    freeSlot();
    return claimInNewTransaction(deps, req, true);
  }
  if (outcome.type === 'claimed') {
    const transaction = singleCommitTransaction(deps.bind, client, {
      timeoutMs: pool.timeoutMs,
      maxSeconds: deps.maxSeconds,
      terminate: async () => backend && pool.query(bound(single.terminate, backend)),
      onEnd: freeSlot,
    });
    deps.opened(outcome.lease, transaction, inserts);
    return { ...outcome, transaction: transaction.transaction };
  }
  // The caller need not wait for the rollback: it only frees the lock and the connection.
  void run({ text: 'ROLLBACK', values: [] })
    .then(
      () => client.release(),
      (err: Error) => client.release(err),
    )
    .finally(freeSlot);
  return outcome;
}

type Run = (config: QueryConfig) => Promise<{ rows: Record<string, unknown>[] }>;

function decideInTransaction(
  deps: ClaimStatements,
  req: ClaimRequest,
  row: ExistingRow,
  run: Run,
): ClaimOutcome | Promise<ClaimOutcome> {
  const claimed = claimedScope(req);
  if (!row.id || row.stale) {
    if (!row.locked) return { type: 'in_progress' };
    const token = randomUUID();
    if (!row.id) return { type: 'claimed', lease: { id: randomUUID(), token, claimed } };
    return takeOver(deps, req, row, run, token, claimed);
  }
  return existingOutcome(row, claimed, deps.codec);
}

/** Archived and taken over inside the transaction: a rollback restores the old row. */
async function takeOver(
  deps: ClaimStatements,
  req: ClaimRequest,
  row: ExistingRow,
  run: Run,
  token: string,
  claimed: ClaimedScope,
): Promise<ClaimOutcome> {
  const taken = await underContention(() => run(takeover(deps.sql, row.id, req, token)));
  // A concurrent takeover won: the transaction (aborted) is rolled back by the caller.
  if (typeof taken === 'string') return { type: 'in_progress' };
  const id = taken.rows[0]?.id as string | undefined;
  if (id)
    return { type: 'claimed', lease: { id, token, claimed, run: taken.rows[0].runs as number } };
  return { type: 'in_progress', ...refusing(row) };
}
