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
  /**
   * Which run of the record this is: 1, plus one per takeover of an abandoned run (in progress
   * past its lease) of the same request. Set by stores with recovery points (`saveStep`).
   */
  run?: number;
}

/** A response as it went over the wire. `body` is null when it was not kept (see `omitted`). */
export interface StoredResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: Buffer | null;
  /**
   * Why a completed record has no body to replay: larger than `maxResponseBytes`, a
   * `storeResponse: 'digest'` route, or sealed with a key that is not configured (or tampered).
   * The handler ran but its outcome could not be captured: a stream, a value that cannot be
   * encoded, a completion write that failed, or an outcome `storeIf` did not keep of a handler
   * that returned (a store without a column for the reason may
   * read these back as `too_large`).
   */
  omitted?:
    | 'too_large'
    | 'digest'
    | 'undecryptable'
    | 'streamed'
    | 'unencodable'
    | 'unrecorded'
    | 'conditional'
    | 'not_kept';
}

export type ClaimOutcome =
  | { type: 'claimed'; lease: Lease }
  /** `recordId`/`expiresAt`: the record that refused (absent when none is committed yet). */
  | { type: 'in_progress'; recordId?: string; expiresAt?: Date }
  | { type: 'mismatch'; recordId?: string; expiresAt?: Date }
  | {
      type: 'completed';
      recordId: string;
      expiresAt: Date;
      /** The record's remaining life by the database clock. */
      secondsLeft: number;
      response: StoredResponse;
    };

/**
 * What `peek` finds, without claiming: what a claim would answer (`completed`, `in_progress`,
 * `mismatch`), or `absent` where a claim would have been granted (no live record).
 */
export type PeekOutcome = Exclude<ClaimOutcome, { type: 'claimed' }> | { type: 'absent' };

/**
 * The outcome of `claimInTransaction`: when claimed, the open transaction the handler writes
 * through and the completion joins; otherwise the store has already ended its transaction.
 */
export type TransactionalClaimOutcome<TManager = unknown> =
  | Exclude<ClaimOutcome, { type: 'claimed' }>
  | { type: 'claimed'; lease: Lease; transaction: IdempotencyTransaction<TManager> };

/**
 * The replays of one completed record in one audit flush (and one UTC day), for the audit trail:
 * one row however many replays. When they happened is given as durations before the call, counted
 * on the app's monotonic clock: the store stamps them with its own clock (PostgreSQL: `now()`
 * minus the duration), never with the app's wall clock.
 */
export interface ReplayEvent {
  recordId: string;
  /** How many replays (at least 1). */
  count: number;
  /** Milliseconds between the first of them and the `recordReplays` call. */
  firstReplayedMsAgo: number;
  /** Milliseconds between the last of them and the `recordReplays` call. */
  replayedMsAgo: number;
  expiresAt: Date;
}

/**
 * Requests of one record refused in one audit flush (and one UTC day), for the audit trail:
 * `in_progress` (409 while it runs), `mismatch` (its key with another request), `not_replayable`
 * (it ran, but its response cannot be replayed).
 */
export interface RefusalEvent {
  /** Null when no record was committed yet (a single-commit claim still running). */
  recordId: string | null;
  kind: 'in_progress' | 'mismatch' | 'not_replayable';
  /** How many (at least 1). */
  count: number;
  /** How long ago (ms, on the app's monotonic clock) the first of them was refused. */
  firstRefusedMsAgo: number;
  /** How long ago the last of them was; the store stamps both with its own clock. */
  refusedMsAgo: number;
  expiresAt: Date;
}

export interface Completion extends StoredResponse {
  /**
   * Keep only what a replay needs (status, headers, body), no derived copy such as a queryable
   * JSON column: set when the full completion was refused once and is retried.
   */
  bytesOnly?: boolean;
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
  /**
   * A skipped run only, when the store knows: the time it was skipped and when the last run any
   * instance recorded finished (null: none), both by the database's clock. Tells runs skipped
   * because another instance cleans from runs skipped because the lock is stuck.
   */
  skipped?: { at: Date; lastRunAt: Date | null };
}

/**
 * The handler's transaction in transactional mode (`@Idempotent({ transactional: true })`), as
 * the store that opened it hands it out: the handler writes through `manager`, and the
 * completion joins it, so the handler's writes and the record commit or roll back together.
 */
export interface IdempotencyTransaction<TManager = unknown> {
  /** What the handler writes through (`IdempotencyContext.manager`), e.g. a TypeORM EntityManager. */
  readonly manager: TManager;
  /** A transaction began (a store may begin it lazily, on the handler's first write) and is open. */
  readonly active: boolean;
  /** Commits if it began, and frees its connection either way. Throws when the commit failed. */
  commit(): Promise<void>;
  /** Rolls back if it began, and frees its connection either way. */
  rollback(): Promise<void>;
  /**
   * Settles when the store ended the transaction on its own before any COMMIT (open too long, or
   * the server ended its session): nothing of it was committed. The request then answers 503 at
   * once, even if the handler still runs; `rollback()` returns once the key is free.
   */
  readonly aborted?: Promise<Error>;
}

/**
 * Persistence of idempotency records: the contract a store implements. `PostgresIdempotencyStore`
 * is the default; pass another as the module's `store` option (or bind it under
 * `IDEMPOTENCY_STORE`). `idempotencyStoreContract()` from 'nestjs-pg-idempotency/testing' checks
 * an implementation against these guarantees.
 *
 * Time: leases and expiry are measured by ONE clock shared by every app instance (the
 * PostgreSQL store uses the database's `now()`), never by each process's own clock.
 * `TManager` is what a transaction of this store hands to handlers (`unknown` without transactions).
 */
export interface IdempotencyStore<TManager = unknown> {
  /**
   * Claims the scope atomically: of any number of concurrent claims of one scope, exactly one
   * gets `claimed` with a fresh lease (a new unique token); the others see what holds it.
   * A record that is stale (completed past its `expiresAt`, or in progress past its lease) is
   * taken over the same way, exactly one winner, with a new record id, and the old owner's token
   * stops working. Otherwise: another `requestHash` → `mismatch`; in progress → `in_progress`;
   * completed → `completed` with the response as stored and its remaining life.
   */
  claim(request: ClaimRequest): Promise<ClaimOutcome>;
  /**
   * Reads the scope's live record as `claim` would see it, and writes nothing: no claim, no
   * takeover, no lock anyone else waits for. A record past its `expiresAt` (completed) or its
   * lease (in progress) is `absent`. For requests that only replay (HEAD on a GET route), so a
   * first GET sent at the same time is never refused by a claim nobody runs. Optional: without
   * it, such a request claims and releases at once (a concurrent GET may get a false 409).
   */
  peek?(scope: IdempotencyScope, requestHash: string): Promise<PeekOutcome>;
  /**
   * Stores the response and marks the record completed, expiring `ttlSeconds` from now; null
   * when the lease was lost (fenced by token: the record is not in progress under this token).
   * With `transaction` (transactional mode; passed only once it is `active`), the write joins it
   * and commits with the handler's writes. A store may commit the transaction itself with the
   * write (single-commit: one round trip); it is then no longer `active`, and `commit()` is a no-op.
   */
  complete(
    lease: Lease,
    completion: Completion,
    transaction?: IdempotencyTransaction<TManager>,
  ): Promise<CompletedRecord | null>;
  /**
   * Opens the handler's transaction (transactional mode). A store without this method cannot
   * serve transactional routes: start-up fails when one exists. `onBegin` runs once, as soon as
   * the transaction really began and before the handler's first statement in it.
   */
  beginTransaction?(
    lease: Lease,
    onBegin?: (transaction: IdempotencyTransaction<TManager>) => Promise<void>,
  ): IdempotencyTransaction<TManager>;
  /**
   * Called from `onBegin`: locks the claim in the transaction and returns true (renewals then
   * stop: the live transaction keeps the claim), or false when renewals should go on (the
   * PostgreSQL store always locks: renewals need a second connection, and conflict with the
   * completion under REPEATABLE READ or SERIALIZABLE). Throws when the claim was lost. Optional:
   * absent means false.
   */
  lockInTransaction?(lease: Lease, transaction: IdempotencyTransaction<TManager>): Promise<boolean>;
  /**
   * Single-commit mode (`transactional: 'single'`): claims the scope inside a new transaction
   * that stays open for the handler, and commits nothing until `complete(lease, c, transaction)`
   * then `transaction.commit()`. Same outcomes as `claim`, and the same exactly-one-winner rule;
   * while the transaction is open every other claim of the scope (either mode) gets
   * `in_progress` at once, and when it ends without a commit (rollback, crash, lost connection)
   * the scope is free at once: no lease, no renewal, `release` is never called for it.
   * Optional: a store without it cannot serve single-commit routes (start-up fails).
   */
  claimInTransaction?(request: ClaimRequest): Promise<TransactionalClaimOutcome<TManager>>;
  /** Appends replay events to the audit trail (and counts them per record). */
  recordReplays(replays: readonly ReplayEvent[]): Promise<void>;
  /** Appends refusal events to the audit trail. Optional: without it, refusals are not kept. */
  recordRefusals?(refusals: readonly RefusalEvent[]): Promise<void>;
  /**
   * Deletes our in-progress claim so a retry runs again; false, and nothing deleted, when the
   * record is not in progress under this lease's token (taken over, or completed).
   */
  release(lease: Lease): Promise<boolean>;
  /**
   * Extends our lease to `leaseSeconds` from now; false when the record is not in progress
   * under this lease's token.
   */
  renew(lease: Lease, leaseSeconds: number): Promise<boolean>;
  /**
   * Ends what the store opened for itself (the PostgreSQL store's lease-renewal connection: a
   * renewal must not wait behind the app's use of its own connections), at shutdown once no run
   * is in flight. Optional.
   */
  close?(): Promise<void>;
  /**
   * Deletes records past `expiresAt` + `retentionSeconds` (never a claim whose lease runs), in
   * batches, one instance at a time (`ran: false` when another holds the cleanup).
   */
  cleanup(options: { batchSize: number; retentionSeconds: number }): Promise<CleanupResult>;
  /**
   * Registers `listener` for when the storage behind the store may have changed (a failover, a
   * restart, a lost connection): the module then drops its replay cache, whose entries may not
   * exist there. Optional: without it the cache lives out its entries' ttl.
   */
  onServerChange?(listener: (change: unknown) => void): void;
  /**
   * Checks at start-up (the module's `onApplicationBootstrap`) that the storage can serve this
   * store: rejects to refuse start-up (tables missing, a read-only database), resolves with a
   * warning to log when the storage does not answer (the app starts; keyed requests fail until
   * it answers), or with nothing when all is well. Optional: without it nothing is checked.
   */
  checkSchema?(): Promise<string | undefined | void>;
  /**
   * Recovery points of `ctx.step()`: the JSON text committed for step `name` of the record in
   * progress under this lease (or carried over from an abandoned run it took over), null when
   * none; counts the read as a resume. Optional, with `saveStep`: without them `ctx.step()`
   * throws. A store with them carries a record's steps over when `claim` takes over an abandoned
   * run (in progress past its lease) of the same `requestHash`, and only then: never to another
   * scope, another request, nor a new operation after a completed record expired.
   */
  loadStep?(lease: Lease, name: string): Promise<string | null>;
  /**
   * Commits step `name`'s JSON result before returning true; false when nothing was written:
   * the lease was lost (fenced by token) or the step is already recorded.
   */
  saveStep?(lease: Lease, name: string, result: string): Promise<boolean>;
}
