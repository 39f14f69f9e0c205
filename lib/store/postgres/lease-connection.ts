import { type QueryConfig, type QueryResult, queryWithin, withinMs } from './pg-deadline.js';
import type { ClientFactory } from './transaction-pooler.probe.js';

type Client = InstanceType<ClientFactory['Client']> & {
  on(event: 'error', listener: (err: Error) => void): unknown;
};

/** Ended after this long without a renewal (renewals come every third of a lease). */
const IDLE_END_MS = 60_000;

/**
 * Lease renewals on a connection of the store's own, not the app's pool: a renewal queued
 * behind handlers that hold every pooled connection (transactional ones, or the app's own
 * queries) let the lease run out while its handler still ran, and another instance took the key
 * over and ran it again. Opened at the first renewal, so an app whose handlers end within a
 * third of the lease never opens it; reopened after a failure; ended when idle or at shutdown.
 * The pool's 'connect' hook runs on it (a search_path or role set there). A pool that cannot make
 * a connection of its own (not a `pg.Pool`), or one the server refuses (a server, role or
 * PgBouncer sized for the app's pools alone), renews through the pool as before.
 */
export class LeaseConnection {
  private client: Promise<Client> | undefined;
  private idle: NodeJS.Timeout | undefined;
  private closed = false;
  /** Renewals sent on it and not yet answered: the idle end waits for them. */
  private busy = 0;

  constructor(
    private readonly factory: () => Partial<ClientFactory> | undefined,
    private readonly timeoutMs: number,
  ) {}

  /** On the pool (`onPool`) when the pool cannot make a connection, or the connection cannot open. */
  query(config: QueryConfig, onPool: () => Promise<QueryResult>): Promise<QueryResult> {
    const factory = this.factory();
    if (this.closed || typeof factory?.Client !== 'function' || !factory.options) return onPool();
    return this.run(factory as ClientFactory, config, onPool);
  }

  private async run(
    factory: ClientFactory,
    config: QueryConfig,
    onPool: () => Promise<QueryResult>,
  ): Promise<QueryResult> {
    const opening = (this.client ??= this.open(factory));
    let client: Client;
    try {
      client = await opening;
    } catch {
      // Refused (a server or role sized for the app's pool, PgBouncer's max_client_conn) or not
      // answering: the pool may still have a connection for it, as before this connection existed.
      if (this.client === opening) this.client = undefined;
      return onPool();
    }
    this.busy++;
    try {
      return await queryWithin(client, config, this.timeoutMs);
    } catch (err) {
      // Its next renewal opens a fresh one: this one may be hung, or on a server that left.
      void this.drop(opening);
      throw err;
    } finally {
      this.busy--;
      this.idleEnd(opening);
    }
  }

  private open(factory: ClientFactory): Promise<Client> {
    const client = new factory.Client(factory.options) as Client;
    const opening = withinMs(client.connect(), this.timeoutMs).then(
      () => {
        // Not what keeps a process up (a pending renewal's deadline timer does): an app that ends
        // its pool without closing the store exits as before, not a minute later.
        (client as { unref?(): void }).unref?.();
        // What the app's pool does to each new connection (its 'connect' hook: search_path, role).
        (factory as { emit?(event: string, client: unknown): unknown }).emit?.('connect', client);
        return client;
      },
      (err: unknown) => {
        void client.end().catch(() => undefined);
        throw err;
      },
    );
    client.on('error', () => void this.drop(opening));
    return opening;
  }

  private idleEnd(opening: Promise<Client>): void {
    if (this.client !== opening) return;
    clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      if (this.busy === 0) void this.drop(opening);
    }, IDLE_END_MS);
    this.idle.unref();
  }

  private drop(opening: Promise<Client> | undefined): Promise<void> {
    if (opening === undefined || this.client !== opening) return Promise.resolve();
    this.client = undefined;
    clearTimeout(this.idle);
    return opening.then((c) => c.end()).catch(() => undefined);
  }

  /** Ends its connection; later renewals go through the pool. */
  close(): Promise<void> {
    this.closed = true;
    return this.drop(this.client);
  }
}
