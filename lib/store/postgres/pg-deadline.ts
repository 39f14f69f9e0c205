import { type StatementCallback, submitDescribedOnce } from './described-once.query.js';
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

/** The pool's `max` (pg's default 10 when unset); undefined before the DataSource is initialized. */
export function poolMax(pool: Pool | undefined): number | undefined {
  if (!pool) return undefined;
  return (pool as { options?: { max?: number } }).options?.max || 10;
}

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

/** `promise`, or a rejection once `ms` passed without it settling. */
export function withinMs<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no connection within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * A prepared statement with its values, in one object shape for every statement: a spread
 * (`{ ...statement, values }`) of the statements' differing shapes took V8's slow copy path.
 */
export function bound(statement: { name?: string; text: string }, values: unknown[]): QueryConfig {
  return { name: statement.name, text: statement.text, values };
}

/**
 * Ends a connection whose statement timed out, best effort: its socket is destroyed (by pg, or
 * by the caller) whatever `end()` does, so a throw or a rejection here changes nothing.
 */
export function endQuietly(client: { end?(): Promise<void> }): void {
  try {
    Promise.resolve(client.end?.()).catch(ignoreError);
  } catch {
    // See above: the socket goes anyway.
  }
}

/** One timer for statements sent together; `expired` once it fired (see `pipelineWithin`). */
export interface SharedDeadline {
  expired: boolean;
}

/** How `submitWithin` reports a statement's end, once: no error (`undefined`) and its result, or its error. */
export type StatementDone = (err: unknown, result?: QueryResult) => void;

/**
 * One statement on a client the caller holds, within `ms`. On timeout the connection is ended at
 * once (pg destroys the socket of a client with a query in flight), so a transaction on it fails
 * fast instead of queueing its ROLLBACK behind the hung query. One promise per statement, settled
 * from pg's callback: an async wrapper around pg's promise cost a second one and its hops.
 */
export function queryWithin(
  client: Queryable & { end?(): Promise<void> },
  config: QueryConfig,
  ms: number,
): Promise<QueryResult> {
  return new Promise((resolve, reject) =>
    submitWithin(client, config, ms, (err, result) =>
      err === undefined ? resolve(result as QueryResult) : reject(err),
    ),
  );
}

/**
 * `queryWithin` by callback, without a promise (a pipeline settles its statements together).
 * Under a `shared` deadline its owner times it: any error once that deadline expired is its
 * timeout.
 */
export function submitWithin(
  client: Queryable & { end?(): Promise<void> },
  config: QueryConfig,
  ms: number,
  done: StatementDone,
  shared?: SharedDeadline,
): void {
  const timed = telemetry.statement(config);
  // pg may call back twice for one statement (an error, then its ReadyForQuery).
  let settled = false;
  const settle = (err: unknown, result?: QueryResult) => {
    if (settled) return;
    settled = true;
    try {
      timed();
    } catch (failed) {
      return done(failed ?? new Error(String(failed)));
    }
    if (err === undefined) return done(undefined, result);
    const late = shared?.expired || (err as Error | undefined)?.message === 'Query read timeout';
    if (!late) return done(err);
    endQuietly(client);
    done(new StoreTimeoutError(config.name ?? 'a statement', ms));
  };
  const callback: StatementCallback = (err, result) => settle(err ?? undefined, result);
  try {
    // Under a shared deadline, pg starts no timer of its own (0 and none on the connection).
    const own = shared ? 0 : ms;
    if (submitDescribedOnce(client, config, own, callback)) return;
    Promise.resolve(
      client.query({
        name: config.name,
        text: config.text,
        values: config.values,
        query_timeout: own,
      }),
    ).then(
      (result) => settle(undefined, result),
      (err: unknown) => settle(err ?? new Error(String(err))),
    );
  } catch (err) {
    settle(err ?? new Error(String(err)));
  }
}
