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
 * A pool that cannot make a connection of its own (not a `pg.Pool`) renews through itself.
 */
export class LeaseConnection {
  private client: Promise<Client> | undefined;
  private idle: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly factory: () => Partial<ClientFactory> | undefined,
    private readonly timeoutMs: number,
  ) {}

  /** Undefined when the pool cannot make a connection: the caller sends it on the pool. */
  query(config: QueryConfig): Promise<QueryResult> | undefined {
    const factory = this.factory();
    if (this.closed || typeof factory?.Client !== 'function' || !factory.options) return undefined;
    return this.run(factory as ClientFactory, config);
  }

  private async run(factory: ClientFactory, config: QueryConfig): Promise<QueryResult> {
    const opening = (this.client ??= this.open(factory));
    let client: Client;
    try {
      client = await opening;
    } catch (err) {
      if (this.client === opening) this.client = undefined;
      throw err;
    }
    try {
      return await queryWithin(client, config, this.timeoutMs);
    } catch (err) {
      // Its next renewal opens a fresh one: this one may be hung, or on a server that left.
      void this.drop(opening);
      throw err;
    } finally {
      this.idleEnd(opening);
    }
  }

  private open(factory: ClientFactory): Promise<Client> {
    const client = new factory.Client(factory.options) as Client;
    const opening = withinMs(client.connect(), this.timeoutMs).then(
      () => client,
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
    this.idle = setTimeout(() => void this.drop(opening), IDLE_END_MS);
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
