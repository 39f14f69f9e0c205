import type { EntityManager } from 'typeorm';

/** Identifies one logical operation: a key is only ever compared within its scope. */
export interface IdempotencyScope {
  key: string;
  endpoint: string;
  userId: string;
}

export interface ClaimRequest extends IdempotencyScope {
  /** SHA-256 hex of the request, computed once before claiming. */
  requestHash: string;
  ttlSeconds: number;
  leaseSeconds: number;
}

/** Proof of ownership of an in-progress claim; every later write is fenced by its token. */
export interface Lease {
  id: string;
  token: string;
  /** What was claimed, set by the store that issued the lease; an encrypted response is bound to it. */
  claimed?: IdempotencyScope & { requestHash: string };
}

/** A response as it went over the wire. `body` is null when it was not kept (see `omitted`). */
export interface StoredResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: Buffer | null;
  /**
   * Why a completed record has no body to replay: larger than `maxResponseBytes`, a
   * `storeResponse: 'digest'` route, or sealed with a key that is not configured (or tampered).
   */
  omitted?: 'too_large' | 'digest' | 'undecryptable';
}

export type ClaimOutcome =
  | { type: 'claimed'; lease: Lease }
  | { type: 'in_progress' }
  | { type: 'mismatch' }
  | {
      type: 'completed';
      recordId: string;
      expiresAt: Date;
      /** The record's remaining life by the database clock. */
      secondsLeft: number;
      response: StoredResponse;
    };

/** One replay of a completed record, for the audit trail. */
export interface ReplayEvent {
  recordId: string;
  replayedAt: Date;
  expiresAt: Date;
}

export interface Completion extends StoredResponse {
  /** The body as JSON text when it is JSON (kept queryable in `response_body`), else null. */
  bodyJson: string | null;
  /**
   * SHA-256 (hex) of the body the client got, on `storeResponse: 'digest'` routes: only the
   * status and this digest are stored (`body`, `bodyJson` and the headers are not).
   */
  bodyDigest?: string | null;
  transactionId: string | null;
  ttlSeconds: number;
}

/** When a completed record stops replaying, by the database clock. */
export interface CompletedRecord {
  expiresAt: Date;
  /** Seconds from completion to `expiresAt`. */
  secondsLeft: number;
}

export interface CleanupResult {
  /** False when another instance held the cleanup lock, so nothing was done. */
  ran: boolean;
  /** Records deleted, live and archived. */
  deleted: number;
  batches: number;
  /** Duration of the slowest single DELETE, in milliseconds. */
  longestBatchMs: number;
}

/**
 * Persistence of idempotency records. `PostgresIdempotencyStore` is the implementation;
 * bind another under `IDEMPOTENCY_STORE` to replace it.
 */
export interface IdempotencyStore {
  /** Claims the scope atomically, or reports what already holds it. */
  claim(request: ClaimRequest): Promise<ClaimOutcome>;
  /**
   * Stores the response; null when the lease was lost (the row is not ours any more).
   * With `transaction`, the write joins it (transactional mode) and commits with the handler's writes.
   */
  complete(
    lease: Lease,
    completion: Completion,
    transaction?: EntityManager,
  ): Promise<CompletedRecord | null>;
  /**
   * First write of a transactional handler's transaction: where the isolation level would make
   * lease renewals conflict with the completion (REPEATABLE READ, SERIALIZABLE), locks the claim
   * in the transaction instead and returns true (renewals must stop); false under READ COMMITTED.
   * Throws when the claim was lost.
   */
  lockInTransaction(lease: Lease, transaction: EntityManager): Promise<boolean>;
  /** Appends replay events to the audit trail. */
  recordReplays(replays: readonly ReplayEvent[]): Promise<void>;
  /** Deletes our in-progress claim so a retry runs again; false when it was not ours any more. */
  release(lease: Lease): Promise<boolean>;
  /** Extends our lease; false when it was lost. */
  renew(lease: Lease, leaseSeconds: number): Promise<boolean>;
  /** Deletes expired records in batches, under a lock that one instance holds at a time. */
  cleanup(options: { batchSize: number; retentionSeconds: number }): Promise<CleanupResult>;
}
