import { type QueryConfig, type QueryResult, queryWithin, withinMs } from './pg-deadline.js';
import type { ClientFactory } from './transaction-pooler.probe.js';

type Client = InstanceType<ClientFactory['Client']> & {
  on(event: 'error', listener: (err: Error) => void): unknown;
  unref?(): void;
  connection?: { stream?: { destroy?(): void } };
};

/** What pg-pool does to each new connection before handing it out (search_path, role). */
interface PoolHooks {
  onConnect?: (client: Client) => unknown;
  verify?: (client: Client, done: (err?: Error) => void) => void;
}

/** Ended after this long without a renewal (renewals come every third of a lease). */
const IDLE_END_MS = 60_000;

/**
 * Where a lease renewal goes when the app's pool has no connection to spare: handlers holding
 * every pooled connection (transactional ones, or the app's own queries) made renewals wait past
 * their deadline, the lease ran out while its handler still ran, and another instance took the
 * key over and ran it again (attack-79). A connection of the store's own, made like the pool's
 * (its options, then its `onConnect`, `verify` and 'connect' hooks), opened only then, reopened
 * after a failure, ended when idle or at shutdown, never keeping the process up. When it cannot
 * open or its renewal fails (a server or PgBouncer sized for the app's pool alone) the renewal is
 * sent on the pool, as it always was.
 */
export class LeaseConnection {
  private client: Promise<Client> | undefined;
  private idle: NodeJS.Timeout | undefined;
  /** Renewals sent on it and not yet answered: the idle end waits for them. */
  private busy = 0;

  constructor(
    private readonly factory: () => Partial<ClientFactory> | undefined,
    private readonly timeoutMs: number,
  ) {}

  query(config: QueryConfig, onPool: () => Promise<QueryResult>): Promise<QueryResult> {
    const factory = this.factory();
    if (typeof factory?.Client !== 'function' || !factory.options) return onPool();
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
      if (this.client === opening) this.client = undefined;
      return onPool();
    }
    this.busy++;
    try {
      return await queryWithin(client, config, this.timeoutMs);
    } catch {
      // Its next renewal opens a fresh one: this one may be hung, or on a server that left.
      void this.drop(opening);
      return onPool();
    } finally {
      this.busy--;
      this.idleEnd(opening);
    }
  }

  private open(factory: ClientFactory): Promise<Client> {
    const client = new factory.Client(factory.options) as Client;
    const hooks = factory.options as PoolHooks;
    const ready = async () => {
      await client.connect();
      // An app that ends its pool without closing the app exits as before, not a minute later.
      client.unref?.();
      await hooks.onConnect?.(client);
      if (typeof hooks.verify === 'function') {
        const verify = hooks.verify;
        await new Promise<void>((resolve, reject) =>
          verify(client, (err) => (err ? reject(err) : resolve())),
        );
      }
      (factory as { emit?(event: string, client: unknown): unknown }).emit?.('connect', client);
      return client;
    };
    const opening = withinMs(ready(), this.timeoutMs).catch((err: unknown) => {
      end(client, this.timeoutMs);
      throw err;
    });
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
    return opening.then(
      (c) => end(c, this.timeoutMs),
      () => undefined,
    );
  }

  /** Ends its connection (a store shared by another app opens a new one when it next renews). */
  close(): Promise<void> {
    return this.drop(this.client);
  }
}

/** Ends `client` within `ms`: a silent server never answers the goodbye, so the socket goes. */
function end(client: Client, ms: number): Promise<void> {
  return withinMs(client.end(), ms).catch(() => client.connection?.stream?.destroy?.());
}
