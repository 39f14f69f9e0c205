import { randomUUID } from 'node:crypto';
import type { DataSource, EntityManager } from 'typeorm';
import {
  adapterBind,
  type TransactionAdapterLike,
  type TransactionClient,
} from '../../interfaces/transaction-adapter.interface.js';
import type { IdempotencyPool } from '../../interfaces/idempotency-pool.interface.js';
import { dataSourcePool, dataSourcePoolMax, isDataSource } from './data-source-pool.js';
import { pgTransactions } from './pg-transactions.adapter.js';
import { typeormTransactions } from './typeorm-transactions.adapter.js';
import { checkPostgresSchema } from './postgres-schema.check.js';
import type { ClientFactory } from './transaction-pooler.probe.js';
import { IDEMPOTENCY_DEFAULTS } from '../../idempotency.defaults.js';
import { runCleanup } from './postgres-cleanup.js';
import { buildStatements, type IdempotencyStatements } from './idempotency.sql.js';
import type { ResponseCipher } from '../../response-cipher.js';
import { StoredResponseCodec, type StoredRow } from './stored-response.codec.js';
import type {
  ClaimOutcome,
  ClaimRequest,
  CleanupResult,
  CompletedRecord,
  Completion,
  IdempotencyStore,
  IdempotencyScope,
  IdempotencyTransaction as Transaction,
  Lease,
  PeekOutcome,
  RefusalEvent,
  ReplayEvent,
  TransactionalClaimOutcome,
} from '../../interfaces/idempotency-store.interface.js';
import { scopeLockKey } from './scope-lock.js';
import { underContention } from './claim-contention.js';
import { buildSingleCommitStatements, type SingleCommitStatements } from './single-commit.sql.js';
import { type SingleCommit, singleCommitTransaction } from './single-commit-transaction.js';
import { pipelineWithin, settledValue } from './pg-pipeline.js';
import { retryingSerialization } from './serialization-retry.js';
import { committedAfterSnapshot, serializationFailure } from './snapshot-probe.js';
import { withoutNames } from './unnamed-statements.js';
import { readOnlyTransactionError } from './topology-check.js';
import { SingleCommitSlots } from './single-commit-slots.js';
import { lazyTransaction } from './lazy-transaction.js';
import { type ServerChange, ServerIdentityWatch } from './server-identity.js';
import {
  bound,
  DeadlinePool,
  type QueryConfig,
  type QueryResult,
  queryWithin,
} from './pg-deadline.js';
import { poolMax } from './single-commit-slots.js';
import { telemetry } from '../../telemetry/idempotency.telemetry.js';
import { buildRecoveryPointStatements } from './recovery-points.sql.js';
import { PostgresRecoveryPoints } from './postgres-recovery-points.js';

interface ExistingRow extends StoredRow {
  /** Empty (NULL) when the scope has no committed row: claim and single-commit lookup. */
  id: string;
  claimed: boolean;
  /** The scope's advisory lock was free: no single-commit transaction holds the scope. */
  locked: boolean;
  status: 'in_progress' | 'completed' | null;
  same_request: boolean;
  stale: boolean;
  expires_at: Date | null;
  seconds_left: number | null;
}

/** What a lease records of the request that claimed it (the cipher binds stored bytes to it). */
function claimedScope(req: ClaimRequest): NonNullable<Lease['claimed']> {
  return { key: req.key, endpoint: req.endpoint, userId: req.userId, requestHash: req.requestHash };
}

/** Rounds of claim → conflicting row vanished / takeover lost; each round is one more statement. */
const MAX_CLAIM_ROUNDS = 5;

/** Options of `new PostgresIdempotencyStore(pool, tableName, options)`. */
export interface PostgresIdempotencyStoreOptions<TManager> {
  /** Seals stored responses (the `encryption` option); null keeps them in plaintext. */
  cipher?: ResponseCipher | null;
  statementTimeoutMs?: number;
  /** False behind a transaction pooler that does not track named statements. */
  preparedStatements?: boolean;
  singleCommitMaxSeconds?: number;
  /**
   * What transactional handlers write through; default `pgTransactions()` on a pool,
   * `typeormTransactions(dataSource)` on a DataSource.
   */
  transactions?: TransactionAdapterLike<TManager>;
}

/**
 * The PostgreSQL store. It talks to a pg pool directly (the app's own `pg.Pool`, or the pool of
 * its TypeORM `DataSource`) with named prepared statements (unnamed ones with
 * `preparedStatements: false`): one round trip per claim, one per completion. Its transactions
 * hand handlers what the `transactions` adapter makes of the store's connection: a TypeORM
 * `EntityManager` by default on a DataSource, the `TransactionClient` itself on a pool.
 */
export class PostgresIdempotencyStore<
  TManager = EntityManager,
> implements IdempotencyStore<TManager> {
  private readonly sql: IdempotencyStatements;
  private readonly single: SingleCommitStatements;
  /** Single-commit leases whose record is not written yet: `complete` inserts it and commits. */
  private readonly inserting = new WeakMap<Lease, SingleCommit<TManager>>();
  /** The store's own way into each transaction it opened (see `on`). */
  private readonly runners = new WeakMap<
    Transaction<TManager>,
    (config: QueryConfig) => Promise<QueryResult>
  >();
  private readonly bind: (client: TransactionClient) => TManager;
  /** The pool, once there (a DataSource's only once it is initialized). */
  private readonly source: () => IdempotencyPool | undefined;
  private readonly preparedStatements: boolean;
  private readonly fallbackPoolMax: number;
  private readonly codec: StoredResponseCodec;
  private isolation?: Promise<string>;
  /** Every statement of the store goes through this: a hung database fails it after the deadline. */
  private readonly pool: DeadlinePool;
  /** Open single-commit transactions, capped below the pool's size. */
  private readonly slots: SingleCommitSlots;
  private readonly singleCommitMaxSeconds: number;
  private readonly server: ServerIdentityWatch;
  private readonly steps: PostgresRecoveryPoints;
  /** The DataSource the store was built on; undefined on a pool. */
  readonly dataSource: DataSource | undefined;

  /**
   * `source`: the app's `pg.Pool` (or anything `IdempotencyPool`), or a TypeORM `DataSource`
   * (PostgreSQL) whose pool the store uses once it is initialized.
   */
  constructor(
    source: IdempotencyPool | DataSource,
    readonly tableName: string,
    options: PostgresIdempotencyStoreOptions<TManager> = {},
  ) {
    const dataSource = isDataSource(source) ? source : undefined;
    this.dataSource = dataSource;
    this.source = dataSource ? dataSourcePool(dataSource) : () => source as IdempotencyPool;
    this.fallbackPoolMax = dataSource ? dataSourcePoolMax(dataSource) : 10;
    const adapter =
      options.transactions ??
      ((dataSource
        ? typeormTransactions(dataSource)
        : pgTransactions()) as TransactionAdapterLike<unknown> as TransactionAdapterLike<TManager>);
    this.bind = adapterBind(adapter);
    const named = options.preparedStatements ?? IDEMPOTENCY_DEFAULTS.preparedStatements;
    this.preparedStatements = named;
    this.sql = named ? buildStatements(tableName) : withoutNames(buildStatements(tableName));
    this.single = named
      ? buildSingleCommitStatements(tableName)
      : withoutNames(buildSingleCommitStatements(tableName));
    this.codec = new StoredResponseCodec(options.cipher ?? null);
    const timeoutMs = options.statementTimeoutMs ?? IDEMPOTENCY_DEFAULTS.statementTimeoutMs;
    this.server = new ServerIdentityWatch(timeoutMs);
    this.pool = new DeadlinePool(() => this.server.watch(this.master()), timeoutMs);
    this.singleCommitMaxSeconds =
      options.singleCommitMaxSeconds ?? IDEMPOTENCY_DEFAULTS.singleCommitMaxSeconds;
    this.slots = new SingleCommitSlots(this.source, this.pool.timeoutMs);
    const steps = buildRecoveryPointStatements(tableName);
    this.steps = new PostgresRecoveryPoints(
      named ? steps : withoutNames(steps),
      (config) => retryingSerialization(() => this.pool.query(config)),
      options.cipher ?? null,
    );
  }

  loadStep(lease: Lease, name: string): Promise<string | null> {
    return this.steps.load(lease, name);
  }

  saveStep(lease: Lease, name: string, result: string): Promise<boolean> {
    return this.steps.save(lease, name, result);
  }

  private master(): IdempotencyPool {
    const pool = this.source();
    if (!pool) throw new Error('nestjs-pg-idempotency: the DataSource is not initialized');
    return pool;
  }

  /** Connections of the pool (before a DataSource is initialized: what it will have). */
  get poolMax(): number {
    return poolMax(this.source()) ?? this.fallbackPoolMax;
  }

  /**
   * Rejects when the library's tables are missing or the database cannot serve claims (a
   * standby, read-only transactions, no unique scope index, a transaction pooler that loses
   * named statements); resolves with a warning when PostgreSQL does not answer.
   */
  checkSchema(): Promise<string | undefined> {
    return checkPostgresSchema(
      this.pool,
      this.tableName,
      this.preparedStatements,
      () => this.source() as unknown as ClientFactory | undefined,
    );
  }

  /**
   * `listener` runs when the server behind the pool may have changed (a connection-level
   * failure, or a new connection answering with another server identity): what was read from
   * the old server, e.g. replay-cached responses, may not be on the new one (asynchronous
   * replication loses the last commits of a failed primary).
   */
  onServerChange(listener: (change: ServerChange) => void): void {
    this.server.subscribe(listener);
    const pool = this.source();
    if (pool) this.server.watch(pool);
  }

  async claim(req: ClaimRequest): Promise<ClaimOutcome> {
    const token = randomUUID();
    const scope = [req.key, req.endpoint, req.userId, req.requestHash];
    const claimed = claimedScope(req);
    let insert = true;
    let lockedStale: string | undefined;
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const result = await underContention(() =>
        insert
          ? this.pool.query(
              bound(this.sql.claim, [
                ...scope,
                token,
                req.leaseSeconds,
                req.ttlSeconds,
                scopeLockKey(this.tableName, req),
              ]),
            )
          : this.pool.query(bound(this.sql.existing, scope)),
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
        return { type: 'in_progress', recordId: row.id, expiresAt: row.expires_at as Date };
      }
      if (row.stale) {
        const taken = await underContention(() =>
          this.pool.query(this.takeover(row.id, req, token)),
        );
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
      return this.existing(row, claimed);
    }
    throw new Error('nestjs-pg-idempotency: claim did not settle; too much contention on one key');
  }

  /** A plain SELECT: never the scope's advisory lock, which would make a concurrent claim wait. */
  async peek(scope: IdempotencyScope, requestHash: string): Promise<PeekOutcome> {
    const { key, endpoint, userId } = scope;
    const { rows } = await this.pool.query(
      bound(this.sql.peek, [key, endpoint, userId, requestHash]),
    );
    const row = rows[0] as unknown as ExistingRow | undefined;
    if (!row) return { type: 'absent' };
    return this.existing(row, { key, endpoint, userId, requestHash });
  }

  /**
   * BEGIN, the scope's advisory lock and the lookup, in one round trip; then the
   * transaction stays open for the handler (claimed), or is rolled back in the background.
   */
  claimInTransaction(req: ClaimRequest): Promise<TransactionalClaimOutcome<TManager>> {
    return this.claimInNewTransaction(req, false);
  }

  /**
   * `again`: claimed once more in a new transaction, after the probe found a record committed
   * after the first one's snapshot (whose lookup shows it); refused again, it is SERIALIZABLE's
   * own conflict check (503, nothing ran).
   */
  private async claimInNewTransaction(
    req: ClaimRequest,
    again: boolean,
  ): Promise<TransactionalClaimOutcome<TManager>> {
    const freeSlot = await this.slots.acquire();
    const client = await this.pool.connect().catch((err: Error) => {
      freeSlot();
      throw err;
    });
    const run = (config: QueryConfig) => queryWithin(client, config, this.pool.timeoutMs);
    let outcome: ClaimOutcome | undefined;
    let inserts: boolean;
    try {
      const scope = [req.key, req.endpoint, req.userId, req.requestHash];
      const [begin, lock, lookup] = await pipelineWithin(
        client,
        [
          { text: 'BEGIN', values: [] },
          bound(this.single.lock, [scopeLockKey(this.tableName, req)]),
          bound(this.single.lookup, scope),
        ],
        this.pool.timeoutMs,
      );
      settledValue(begin);
      const locking = settledValue(lock).rows[0];
      if (locking?.read_only === true) throw readOnlyTransactionError();
      const row = {
        ...(settledValue(lookup).rows[0] as unknown as ExistingRow),
        locked: locking?.locked === true,
      };
      // The snapshot predates the lock: the last holder may have committed between the two.
      const raced =
        row.locked &&
        (!row.id || row.stale) &&
        locking?.snapshot_held === true &&
        (await committedAfterSnapshot(
          client,
          bound(this.single.probe, scope),
          this.pool.timeoutMs,
        ));
      if (raced && again) throw serializationFailure();
      if (raced) await run({ text: 'ROLLBACK', values: [] });
      inserts = !raced && !row.id && row.locked;
      outcome = raced ? undefined : await this.decideInTransaction(req, row, run);
    } catch (err) {
      client.release(err as Error);
      freeSlot();
      throw err;
    }
    // No outcome: the probe found a race, and the transaction was rolled back.
    if (!outcome) {
      client.release();
      freeSlot();
      return this.claimInNewTransaction(req, true);
    }
    if (outcome.type === 'claimed') {
      const single = singleCommitTransaction(this.bind, client, {
        timeoutMs: this.pool.timeoutMs,
        maxSeconds: this.singleCommitMaxSeconds,
        terminate: (pid) => this.pool.query(bound(this.single.terminate, [pid])),
        onEnd: freeSlot,
      });
      if (inserts) this.inserting.set(outcome.lease, single);
      this.runners.set(single.transaction, single.run);
      return { ...outcome, transaction: single.transaction };
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

  private async decideInTransaction(
    req: ClaimRequest,
    row: ExistingRow,
    run: (config: QueryConfig) => Promise<{ rows: Record<string, unknown>[] }>,
  ): Promise<ClaimOutcome> {
    const claimed = claimedScope(req);
    if (!row.id || row.stale) {
      if (!row.locked) return { type: 'in_progress' };
      const token = randomUUID();
      if (!row.id) return { type: 'claimed', lease: { id: randomUUID(), token, claimed } };
      // Archived and taken over inside the transaction: a rollback restores the old row.
      const taken = await underContention(() => run(this.takeover(row.id, req, token)));
      // A concurrent takeover won: the transaction (aborted) is rolled back by the caller.
      if (typeof taken === 'string') return { type: 'in_progress' };
      const id = taken.rows[0]?.id as string | undefined;
      if (id)
        return {
          type: 'claimed',
          lease: { id, token, claimed, run: taken.rows[0].runs as number },
        };
      return { type: 'in_progress', recordId: row.id, expiresAt: row.expires_at as Date };
    }
    return this.existing(row, claimed);
  }

  private takeover(recordId: string, req: ClaimRequest, token: string): QueryConfig {
    const { requestHash, leaseSeconds, ttlSeconds } = req;
    return bound(this.sql.takeover, [recordId, requestHash, token, leaseSeconds, ttlSeconds]);
  }

  /** What a committed, live row of the scope answers: a mismatch, in progress, or its replay. */
  private existing(
    row: ExistingRow,
    claimed: NonNullable<Lease['claimed']>,
  ): Exclude<ClaimOutcome, { type: 'claimed' }> {
    const refusing = { recordId: row.id, expiresAt: row.expires_at as Date };
    if (!row.same_request) return { type: 'mismatch', ...refusing };
    if (row.status === 'in_progress') return { type: 'in_progress', ...refusing };
    return {
      type: 'completed',
      recordId: row.id,
      expiresAt: row.expires_at as Date,
      secondsLeft: row.seconds_left as number,
      response: this.codec.fromRow(row, claimed),
    };
  }

  /** The response's bind values, in the order both the completion UPDATE and the single-commit INSERT take them. */
  private responseValues(c: Completion, kept: ReturnType<StoredResponseCodec['toColumns']>) {
    return [
      c.statusCode,
      kept.headers,
      kept.raw,
      kept.json,
      c.transactionId,
      c.ttlSeconds,
      kept.keyId,
      kept.digest,
    ];
  }

  async complete(
    lease: Lease,
    c: Completion,
    transaction?: Transaction<TManager>,
  ): Promise<CompletedRecord | null> {
    const kept = this.codec.toColumns(lease, c);
    const single = transaction && this.inserting.get(lease);
    // Single-commit: the record is inserted and the transaction committed in one round trip.
    const scope = lease.claimed as NonNullable<Lease['claimed']>;
    const result = single
      ? await single.commitWith(
          bound(this.single.insertCompleted, [
            lease.id,
            scope.key,
            scope.endpoint,
            scope.userId,
            scope.requestHash,
            ...this.responseValues(c, kept),
          ]),
        )
      : await this.completeOwned(
          transaction,
          bound(this.sql.complete, [lease.id, lease.token, ...this.responseValues(c, kept)]),
        );
    const row = result?.rows[0] as { expires_ms: number; seconds_left: number } | undefined;
    return row ? { expiresAt: new Date(row.expires_ms), secondsLeft: row.seconds_left } : null;
  }

  /**
   * A lazy transaction (see `lazyTransaction`): no connection is held until the handler's first
   * statement, and `onBegin` runs right after BEGIN.
   */
  beginTransaction(
    _lease: Lease,
    onBegin?: (transaction: Transaction<TManager>) => Promise<void>,
  ): Transaction<TManager> {
    const lazy = lazyTransaction(this.pool, this.bind, async (tx) => onBegin?.(tx));
    this.runners.set(lazy.transaction, lazy.run);
    return lazy.transaction;
  }

  async lockInTransaction(lease: Lease, transaction: Transaction<TManager>): Promise<boolean> {
    // Read in the transaction itself: from the pool it would need a second connection, and
    // transactions beginning at once could hold every one of them, each waiting for another.
    this.isolation ??= this.on(transaction, { text: this.sql.isolation, values: [] }).then(
      ({ rows }) => String(rows[0]?.isolation),
    );
    const isolation = await this.isolation.catch((err: Error) => {
      this.isolation = undefined;
      throw err;
    });
    if (isolation === 'read committed') return false;
    const { rowCount } = await this.on(
      transaction,
      bound(this.sql.lockClaim, [lease.id, lease.token]),
    );
    if (rowCount !== 1) throw new Error('nestjs-pg-idempotency: the claim was lost');
    return true;
  }

  /**
   * Outside a transaction the completion is a transaction of its own, fenced by the token: sent
   * again when refused as a serialization failure (a lease renewal committed after its snapshot,
   * under REPEATABLE READ or SERIALIZABLE), instead of falling back to the bytes alone.
   */
  private completeOwned(transaction: Transaction<TManager> | undefined, config: QueryConfig) {
    if (transaction) return this.on(transaction, config);
    return retryingSerialization(() => this.pool.query(config));
  }

  /**
   * Runs a statement in the transaction's own pg client (so prepared statements are reused there
   * too), or on the pool; under the same deadline either way.
   */
  private on(transaction: Transaction<TManager> | undefined, config: QueryConfig) {
    const run = transaction && this.runners.get(transaction);
    return run ? run(config) : this.pool.query(config);
  }

  async recordReplays(replays: readonly ReplayEvent[]): Promise<void> {
    if (replays.length === 0) return;
    await this.pool.query(
      bound(this.sql.recordReplays, [
        replays.map((r) => r.recordId),
        replays.map((r) => r.replayedMsAgo),
        replays.map((r) => r.expiresAt),
        replays.map((r) => r.count),
        replays.map((r) => r.firstReplayedMsAgo),
      ]),
    );
  }

  async recordRefusals(refusals: readonly RefusalEvent[]): Promise<void> {
    if (refusals.length === 0) return;
    const column = <K extends keyof RefusalEvent>(k: K) => refusals.map((r) => r[k]);
    await this.pool.query(
      bound(this.sql.recordRefusals, [
        column('recordId'),
        column('kind'),
        column('count'),
        column('firstRefusedMsAgo'),
        column('refusedMsAgo'),
        column('expiresAt'),
      ]),
    );
  }

  async release(lease: Lease): Promise<boolean> {
    const { rowCount } = await retryingSerialization(() =>
      this.pool.query(bound(this.sql.release, [lease.id, lease.token])),
    );
    return rowCount === 1;
  }

  async renew(lease: Lease, leaseSeconds: number): Promise<boolean> {
    const { rowCount } = await retryingSerialization(() =>
      this.pool.query(bound(this.sql.renew, [lease.id, lease.token, leaseSeconds])),
    );
    return rowCount === 1;
  }

  cleanup(options: { batchSize: number; retentionSeconds: number }): Promise<CleanupResult> {
    return runCleanup(this.pool, this.sql, this.tableName, options);
  }
}
