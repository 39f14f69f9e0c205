import { telemetry } from '../../telemetry/idempotency.telemetry.js';
import type {
  Pool,
  PoolClient,
  Queryable,
  QueryConfig,
  QueryResult,
} from '../../interfaces/idempotency-pool.interface.js';

export type { Pool, PoolClient, Queryable, QueryConfig, QueryResult };

const ignoreError = () => undefined;

/**
 * Past this many pool checkouts given up on and still pending, statements fail at once: the
 * database is not answering, and each abandoned checkout waits in pg's pool queue until it does.
 */
const MAX_ABANDONED_CHECKOUTS = 100;

export class StoreTimeoutError extends Error {
  constructor(what: string, ms: number) {
    super(`nestjs-pg-idempotency: PostgreSQL did not answer ${what} within ${ms} ms`);
  }
}

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
      pool.on?.('connect', (client) => client.on('error', ignoreError));
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

/**
 * A checked-out client has no 'error' listener of pg's pool: a connection lost between or during
 * statements would crash the process. The statement in flight fails with the error anyway.
 */
function guarded(client: PoolClient): PoolClient {
  const ignore = () => undefined;
  client.on('error', ignore);
  const release = client.release;
  client.release = (err) => {
    // A failed connection is destroyed, not pooled: its late errors (a FATAL after a terminated
    // backend) still need a listener, or they crash the process.
    if (!err) client.removeListener('error', ignore);
    release.call(client, err);
  };
  return client;
}

/**
 * One statement on a client the caller holds, within `ms`. On timeout the connection is ended at
 * once (pg destroys the socket of a client with a query in flight), so a transaction on it fails
 * fast instead of queueing its ROLLBACK behind the hung query.
 */
export async function queryWithin(
  client: Queryable & { end?(): Promise<void> },
  config: QueryConfig,
  ms: number,
): Promise<QueryResult> {
  const timed = telemetry.statement(config);
  try {
    return await client.query({ ...config, query_timeout: ms });
  } catch (err) {
    if ((err as Error).message !== 'Query read timeout') throw err;
    void client.end?.().catch(() => undefined);
    throw new StoreTimeoutError(config.name ?? 'a statement', ms);
  } finally {
    timed();
  }
}
