import { StoreTimeoutError } from './pg-deadline.js';
import { STORE_TYPES } from './store-types.js';

/**
 * Which PostgreSQL server the pool talks to. A failover (a standby promoted, a virtual IP moved)
 * or a restart gives the same connection string another server: the cluster's system identifier
 * and timeline, and the postmaster's start time, tell them apart (the timeline in pg_control
 * moves only at the first checkpoint after a promotion; the start time differs at once).
 */
const IDENTITY_SQL = [
  `SELECT s.system_identifier::text || '/' || c.timeline_id || '/' || pg_postmaster_start_time()
          AS identity FROM pg_control_system() s, pg_control_checkpoint() c`,
  // Where the pg_control functions are revoked (some managed services).
  `SELECT coalesce(host(inet_server_addr()), '') || '/' || pg_postmaster_start_time() AS identity`,
];

/** The slice of pg's pool the watch needs. */
export interface WatchedPool {
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'release', listener: (err: Error | undefined) => void): unknown;
  /** pg-pool calls `verify` on each new connection before handing it out. */
  options?: { verify?: (client: IdentityClient, done: (err?: Error) => void) => void };
}
interface IdentityClient {
  query(config: {
    text: string;
    values: unknown[];
    query_timeout: number;
    types: unknown;
  }): Promise<{ rows: Record<string, unknown>[] }>;
}

export type ServerChange =
  { type: 'connection_lost'; error: Error } | { type: 'identity'; identity: string };

/**
 * A deadline that passed says the server is slow or unreachable, not that it is another one: the
 * cache keeps answering replays while PostgreSQL hangs, and the identity read on the next new
 * connection tells whether the server changed.
 */
const DEADLINES = new Set([
  'Query read timeout',
  'timeout exceeded when trying to connect',
  'Connection terminated due to connection timeout',
]);

export function isDeadline(err: unknown): boolean {
  return (
    err instanceof StoreTimeoutError || DEADLINES.has((err as Error | undefined)?.message ?? '')
  );
}

/**
 * A connection-level failure: the server went away, as opposed to a statement it refused or a
 * deadline it missed. pg's own errors (`Connection terminated ...`) carry no SQLSTATE; class 08
 * is connection exceptions, 57P01–57P03 shutdown and start-up.
 */
export function isConnectionFailure(err: unknown): boolean {
  if (
    err instanceof StoreTimeoutError ||
    DEADLINES.has((err as Error | undefined)?.message ?? '')
  ) {
    return false;
  }
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code !== 'string') return true;
  return /^08|^57P0[123]$|^E[A-Z]+$/.test(code);
}

/**
 * Watches a pool for signs that the server behind it may have changed: an idle connection that
 * died, a connection released after a connection-level failure, or a new connection answering
 * with another identity than the last one seen (the first one seen counts as a change: what was
 * learned before it cannot be placed).
 */
export class ServerIdentityWatch {
  private readonly listeners = new Set<(change: ServerChange) => void>();
  private readonly watched = new WeakSet<object>();
  private identity?: string;
  private sql = 0;

  /** `timeoutMs`: the deadline of the identity query (the store's statement deadline). */
  constructor(private readonly timeoutMs: number) {}

  subscribe(listener: (change: ServerChange) => void): void {
    this.listeners.add(listener);
  }

  /** Attaches to `pool` once; returns it, so it fits a pool getter. */
  watch<P>(pool: P): P {
    const p = pool as unknown as WatchedPool | undefined;
    if (!p || typeof p.on !== 'function' || this.watched.has(p)) return pool;
    this.watched.add(p);
    p.on('error', (error) => this.emit({ type: 'connection_lost', error }));
    p.on('release', (error) => {
      if (error && isConnectionFailure(error)) this.emit({ type: 'connection_lost', error });
    });
    // Before a new connection is handed out, so a change is known (and acted on) before
    // anything read on it is used. A verify of the app's own still runs, after. A connection
    // lost (or hung) meanwhile goes back to pg-pool as failed: it destroys it and fails the wait.
    if (p.options) {
      const own = p.options.verify;
      p.options.verify = (client, done) =>
        void this.check(client).then((lost) =>
          lost ? done(lost) : own ? own(client, done) : done(),
        );
    }
    return pool;
  }

  /** Reads the identity on a new connection; the error when the connection failed meanwhile. */
  private async check(client: IdentityClient): Promise<Error | undefined> {
    for (; this.sql < IDENTITY_SQL.length; this.sql++) {
      try {
        const { rows } = await client.query({
          text: IDENTITY_SQL[this.sql],
          values: [],
          query_timeout: this.timeoutMs,
          types: STORE_TYPES,
        });
        const identity = String(rows[0]?.identity);
        if (identity !== this.identity) {
          this.identity = identity;
          this.emit({ type: 'identity', identity });
        }
        return;
      } catch (error) {
        if (isConnectionFailure(error) || isDeadline(error)) return error as Error;
      }
    }
  }

  private emit(change: ServerChange): void {
    for (const listener of this.listeners) listener(change);
  }
}
