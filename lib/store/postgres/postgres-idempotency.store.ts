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
import { TransactionAbortedError } from '../transaction-aborted.error.js';
import { buildStatements, type IdempotencyStatements } from './idempotency.sql.js';
import type { ResponseCipher } from '../../response-cipher.js';
import { StoredResponseCodec } from './stored-response.codec.js';
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
import { type ClaimStatements, claimScope } from './postgres-claim.js';
import { type ExistingRow, existingOutcome } from './scope-row.js';
import { claimInNewTransaction, type SingleCommitClaimDeps } from './single-commit-claim.js';
import { buildSingleCommitStatements, type SingleCommitStatements } from './single-commit.sql.js';
import type { SingleCommit } from './single-commit-transaction.js';
import { retryingSerialization } from './serialization-retry.js';
import { withoutNames } from './unnamed-statements.js';
import { SingleCommitSlots } from './single-commit-slots.js';
import { lazyTransaction } from './lazy-transaction.js';
import { type ServerChange, ServerIdentityWatch } from './server-identity.js';
import { DeadlinePool } from './deadline-pool.js';
import { bound, poolMax, type QueryConfig, type QueryResult } from './pg-deadline.js';
import { buildRecoveryPointStatements } from './recovery-points.sql.js';
import { PostgresRecoveryPoints } from './postgres-recovery-points.js';
import { LeaseConnection } from './lease-connection.js';
import { integerArray, numberArray, uuidArray } from './array-literal.js';

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
  /** Every statement of the store goes through this: a hung database fails it after the deadline. */
  private readonly pool: DeadlinePool;
  /** Open single-commit transactions, capped below the pool's size. */
  private readonly slots: SingleCommitSlots;
  private readonly singleCommitMaxSeconds: number;
  private readonly server: ServerIdentityWatch;
  private readonly steps: PostgresRecoveryPoints;
  private readonly statements: ClaimStatements;
  /** What a single-commit claim needs, built at the first one (not one copy per claim). */
  private singleDeps?: SingleCommitClaimDeps<TManager>;
  private readonly leases: LeaseConnection;
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
    this.leases = new LeaseConnection(
      () => this.source() as Partial<ClientFactory> | undefined,
      timeoutMs,
    );
    this.statements = { pool: this.pool, sql: this.sql, tableName, codec: this.codec };
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

  claim(req: ClaimRequest): Promise<ClaimOutcome> {
    return claimScope(this.statements, req);
  }

  /** A plain SELECT: never the scope's advisory lock, which would make a concurrent claim wait. */
  async peek(scope: IdempotencyScope, requestHash: string): Promise<PeekOutcome> {
    const { key, endpoint, userId } = scope;
    const { rows } = await this.pool.query(
      bound(this.sql.peek, [key, endpoint, userId, requestHash]),
    );
    const row = rows[0] as unknown as ExistingRow | undefined;
    if (!row) return { type: 'absent' };
    return existingOutcome(row, { key, endpoint, userId, requestHash }, this.codec);
  }

  /**
   * BEGIN, the scope's advisory lock and the lookup, in one round trip; then the
   * transaction stays open for the handler (claimed), or is rolled back in the background.
   */
  claimInTransaction(req: ClaimRequest): Promise<TransactionalClaimOutcome<TManager>> {
    this.singleDeps ??= {
      ...this.statements,
      single: this.single,
      slots: this.slots,
      bind: this.bind,
      maxSeconds: this.singleCommitMaxSeconds,
      opened: (lease, single, inserts) => {
        if (inserts) this.inserting.set(lease, single);
        this.runners.set(single.transaction, single.run);
      },
    };
    return claimInNewTransaction(this.singleDeps, req);
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

  /**
   * The claim row, locked as the transaction's first statement whatever its isolation level:
   * the live transaction keeps the claim without renewals, which would need a second connection
   * from a pool its peers may hold (a takeover skips a locked row), and under REPEATABLE READ or
   * SERIALIZABLE would make the completion fail as a serialization error.
   */
  async lockInTransaction(lease: Lease, transaction: Transaction<TManager>): Promise<boolean> {
    const { rowCount } = await this.on(
      transaction,
      bound(this.sql.lockClaim, [lease.id, lease.token]),
    );
    if (rowCount !== 1) {
      throw new TransactionAbortedError('the claim was taken over before the transaction began');
    }
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
        uuidArray(replays.map((r) => r.recordId)),
        numberArray(replays.map((r) => r.replayedMsAgo)),
        integerArray(replays.map((r) => r.expiresAt.getTime())),
        integerArray(replays.map((r) => r.count)),
        numberArray(replays.map((r) => r.firstReplayedMsAgo)),
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

  /** On the pool, or on the store's own connection when the pool has none to spare. */
  async renew(lease: Lease, leaseSeconds: number): Promise<boolean> {
    const config = bound(this.sql.renew, [lease.id, lease.token, leaseSeconds]);
    const onPool = () => this.pool.query(config);
    const { rowCount } = await retryingSerialization(() =>
      this.pool.hasRoom() ? onPool() : this.leases.query(config, onPool),
    );
    return rowCount === 1;
  }

  /** Ends the connection it renews leases on (the app's pool is the app's to end). */
  close(): Promise<void> {
    return this.leases.close();
  }

  cleanup(options: { batchSize: number; retentionSeconds: number }): Promise<CleanupResult> {
    return runCleanup(this.pool, this.sql, this.tableName, options);
  }
}
