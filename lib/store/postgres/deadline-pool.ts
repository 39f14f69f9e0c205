import {
  ignoreError,
  type Pool,
  type PoolClient,
  poolMax,
  type QueryConfig,
  type QueryResult,
  queryWithin,
  StoreTimeoutError,
  submitWithin,
} from './pg-deadline.js';

/**
 * Past this many pool checkouts given up on and still pending, statements fail at once: the
 * database is not answering, and each abandoned checkout waits in pg's pool queue until it does.
 */
const MAX_ABANDONED_CHECKOUTS = 100;

/**
 * Client-side deadlines for the store's statements. A server-side `statement_timeout` cannot help
 * when the TCP peer hangs, so the wait for a pool connection and the query each get a timer (pg's
 * own `query_timeout`), and a connection whose query timed out is destroyed, never reused.
 */
export class DeadlinePool {
  private abandoned = 0;
  private readonly watched = new WeakSet<Pool>();

  constructor(
    private readonly pool: () => Pool,
    readonly timeoutMs: number,
  ) {}

  /** One statement on a pooled connection, like `pool.query`, within the deadline. */
  query(config: QueryConfig): Promise<QueryResult> {
    const pool = this.checkedPool();
    if (pool instanceof Error) return Promise.reject(pool);
    if (!handsOverAtOnce(pool) || !takesCallback(pool)) return this.queryAfterCheckout(config);
    // pg's pool by callback, the connection handed over at once: one promise per statement
    // instead of five (pg-pool's two, the checkout's, this method's and the statement's).
    const started = performance.now();
    return new Promise((resolve, reject) =>
      (pool as unknown as CallbackPool).connect((err, client) => {
        if (err || !client) return reject(err ?? new Error('nestjs-pg-idempotency: no connection'));
        const checkedOut = guarded(client);
        submitWithin(checkedOut, config, this.left(started), (failed, result) => {
          try {
            // As pg's pool.query does: an error removes the connection (and ends a hung one).
            checkedOut.release(failed === undefined ? undefined : (failed as Error));
          } catch (releaseFailed) {
            return reject(releaseFailed as Error);
          }
          return failed === undefined ? resolve(result as QueryResult) : reject(failed);
        });
      }),
    );
  }

  private async queryAfterCheckout(config: QueryConfig): Promise<QueryResult> {
    const started = performance.now();
    const client = await this.connect();
    try {
      const result = await queryWithin(client, config, this.left(started));
      client.release();
      return result;
    } catch (err) {
      // As pg's pool.query does: an error removes the connection (and ends a hung one at once).
      client.release(err as Error);
      throw err;
    }
  }

  /**
   * Whether a statement would get a connection without waiting behind the app's use of the pool
   * (an idle one for it, or room for a new one); true when the pool does not say.
   */
  hasRoom(): boolean {
    const pool = this.pool();
    const {
      idleCount,
      waitingCount = 0,
      totalCount,
    } = pool as {
      idleCount?: number;
      waitingCount?: number;
      totalCount?: number;
    };
    if (idleCount === undefined || totalCount === undefined) return true;
    return idleCount > waitingCount || totalCount < (poolMax(pool) ?? 10);
  }

  /** What is left of the deadline for the statement, after its checkout began at `started`. */
  private left(started: number): number {
    return Math.max(1, Math.round(this.timeoutMs - (performance.now() - started)));
  }

  /** The pool, watched for new connections; an error once too many checkouts were given up on. */
  private checkedPool(): Pool | StoreTimeoutError {
    if (this.abandoned >= MAX_ABANDONED_CHECKOUTS) {
      return new StoreTimeoutError('a connection request', this.timeoutMs);
    }
    const pool = this.pool();
    if (!this.watched.has(pool)) {
      this.watched.add(pool);
      // pg-pool hands a new connection to its waiter a tick after taking its idle listener off:
      // a FATAL read in the same chunk as its first ReadyForQuery (a backend terminated as it
      // started, bytes replayed after a network stall) would find no listener and crash the
      // process. Errors of a checked-out connection reach its queries anyway.
      pool.on?.('connect', (client) => void guarded(client));
    }
    return pool;
  }

  /** A pooled connection within the deadline; the caller releases it (`release(err)` on errors). */
  connect(): Promise<PoolClient> {
    const pool = this.checkedPool();
    if (pool instanceof Error) return Promise.reject(pool);
    // An idle connection for every waiter ahead and this one: pg-pool hands it over on the next
    // tick, before any I/O could take it away, so there is nothing to time (one timer less).
    if (handsOverAtOnce(pool)) return pool.connect().then(guarded);
    return new Promise((resolve, reject) => {
      let late = false;
      const timer = setTimeout(() => {
        late = true;
        this.abandoned++;
        reject(new StoreTimeoutError('a connection request', this.timeoutMs));
      }, this.timeoutMs);
      pool.connect().then(
        (client) => {
          if (!late) {
            clearTimeout(timer);
            return resolve(guarded(client));
          }
          // Given up on: hand it straight back, healthy, for the next statement.
          this.abandoned--;
          client.release();
        },
        (err: Error) => {
          if (!late) {
            clearTimeout(timer);
            return reject(err);
          }
          this.abandoned--;
        },
      );
    });
  }
}

/** pg-pool's counts say an idle connection is there for every waiter ahead and this one. */
function handsOverAtOnce(pool: Pool): boolean {
  const { idleCount, waitingCount } = pool as { idleCount?: number; waitingCount?: number };
  return idleCount !== undefined && waitingCount !== undefined && idleCount > waitingCount;
}

interface CallbackPool {
  connect(callback: (err: Error | undefined, client: PoolClient | undefined) => void): void;
}

/**
 * pg's own pool, which answers `connect(callback)` by callback; another pool might take no
 * callback and return a promise, leaving the callback unanswered with no deadline running.
 */
function takesCallback(pool: Pool): boolean {
  return typeof (pool as { _pulseQueue?: unknown })._pulseQueue === 'function';
}

/** Connections that already carry `ignoreError` (it stays with them for their whole life). */
const listening = new WeakSet<PoolClient>();

/**
 * A checked-out client has no 'error' listener of pg's pool: a connection lost between or during
 * statements would crash the process. The statement in flight fails with the error anyway. The
 * listener is added once per connection and kept (as the pool's 'connect' hook does for the
 * connections it opens): adding and removing one on every checkout cost a closure, a wrapped
 * `release` and two listener-array copies per statement.
 */
function guarded(client: PoolClient): PoolClient {
  if (!listening.has(client)) {
    listening.add(client);
    client.on('error', ignoreError);
  }
  return client;
}
