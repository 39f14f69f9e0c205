import {
  ignoreError,
  type Pool,
  type PoolClient,
  poolMax,
  type QueryConfig,
  type QueryResult,
  queryWithin,
  StoreTimeoutError,
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
  async query(config: QueryConfig): Promise<QueryResult> {
    const started = performance.now();
    const client = await this.connect();
    const left = Math.max(1, Math.round(this.timeoutMs - (performance.now() - started)));
    try {
      const result = await queryWithin(client, config, left);
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

  /** A pooled connection within the deadline; the caller releases it (`release(err)` on errors). */
  connect(): Promise<PoolClient> {
    if (this.abandoned >= MAX_ABANDONED_CHECKOUTS) {
      return Promise.reject(new StoreTimeoutError('a connection request', this.timeoutMs));
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
    // An idle connection for every waiter ahead and this one: pg-pool hands it over on the next
    // tick, before any I/O could take it away, so there is nothing to time (one timer less).
    const { idleCount, waitingCount } = pool as { idleCount?: number; waitingCount?: number };
    if (idleCount !== undefined && waitingCount !== undefined && idleCount > waitingCount) {
      return pool.connect().then(guarded);
    }
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
