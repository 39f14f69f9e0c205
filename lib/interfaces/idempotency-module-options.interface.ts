import type { DataSource } from 'typeorm';
import type { IdempotencyStore } from './idempotency-store.interface.js';
import type { IdempotencyPool } from './idempotency-pool.interface.js';
import type { TransactionAdapterLike } from './transaction-adapter.interface.js';

/** Anything the platform hands to handlers as the request (Express or Fastify). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type IdempotencyRequest = any;

/** Settings of the scheduled job that deletes expired records. */
export interface IdempotencyCleanupOptions {
  /**
   * Registers the cleanup cron job with `SchedulerRegistry`. The app must import
   * `ScheduleModule.forRoot()` itself; this library never does.
   * @default true
   */
  enabled?: boolean;
  /**
   * Cron expression (six fields allowed: seconds first); validated at start-up.
   * @default '0 *\/10 * * * *' (every ten minutes)
   * @example '0 3 * * *'
   */
  cron?: string;
  /**
   * Rows deleted per statement. A run's statements share one transaction (it holds the cleanup
   * lock), committed at the end of the run.
   * @default 1000 (smaller batches keep claim latency flat while a large backlog is deleted)
   */
  batchSize?: number;
  /**
   * How long a record (and its archived versions, replay and refusal rows) is kept after
   * `expires_at` before cleanup deletes it (audit retention). Retained records never replay: past
   * `expires_at` the key is new again, and a retry is a new operation (the old record moves to
   * the archive). The log of cleanup runs (`<table>_cleanup_runs`) is kept this long too, and at
   * least 30 days. The daily views keep their figures for deleted rows (`<table>_daily_rollup`),
   * so shortening this only shortens the per-record history.
   * @default 34560000 (400 days: a year of statements and a month to reconcile them)
   * @example 90 * 24 * 3600 // keep 90 days of per-record history
   * @example 0 // delete records as soon as they expire
   */
  retentionSeconds?: number;
}

/** Keys for encrypting stored responses (AES-256-GCM), with rotation. */
export interface IdempotencyEncryptionOptions {
  /**
   * Every key that may have sealed a stored response, by key id (1-64 visible ASCII characters,
   * stored per row in `response_key_id`). Each key is exactly 32 bytes: a `Buffer`, or a base64
   * string. Keep a retired key listed until the rows it sealed have expired.
   * @example { '2026-11': process.env.IDEM_KEY_2026_11!, '2026-12': process.env.IDEM_KEY_2026_12! }
   */
  keys: Record<string, Buffer | string>;
  /**
   * The key id that seals new responses; it must be one of `keys`.
   * @example '2026-12'
   */
  activeKeyId: string;
}

/** What `storeIf` decides on: keep the response and replay it, or release the key. */
export type StoreIfFn = (statusCode: number, error: unknown) => boolean;

/** A microservice message answered without its handler (`onRpcWithoutHandler`). */
export interface RpcWithoutHandlerEvent {
  /** The payload. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  data: any;
  /** The transport's context (`RmqContext`, `NatsContext`, `TcpContext`...). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  context: any;
  /**
   * The handler answered for, as `Class.method` (several `@EventPattern()` handlers of one
   * event are each their own operation).
   */
  handler: string;
  /**
   * `message`: a call whose caller waits for the answer and retries it with the same key (a
   * `@MessagePattern()` sent with `send()`); `event`: nobody waits (an `@EventPattern()`, or a
   * `client.emit()` to a message handler: RabbitMQ's message has no `replyTo`); only a
   * redelivery retries it.
   */
  kind: 'message' | 'event';
  /** `replayed`: the stored outcome went back; `refused`: an error with `code` did. */
  outcome: 'replayed' | 'refused';
  /** The refusal's problem code (`ProblemCode`), e.g. `idempotency_store_unavailable`. */
  code?: string;
}

/** Options of `IdempotencyModule.forRoot()` / `forRootAsync()`. */
export interface IdempotencyModuleOptions {
  /**
   * The app's own `pg.Pool` (or any `IdempotencyPool`), for the default
   * `PostgresIdempotencyStore`: the store opens no pool of its own, and TypeORM is not needed.
   * Transactional handlers get the store's `TransactionClient` (pg's `query`) as
   * `idem.manager`, unless `transactions` says otherwise. Exactly one of `pool`, `dataSource`
   * and `store` is required. The module never ends the pool: the app does.
   * @default undefined
   * @example IdempotencyModule.forRoot({ pool: new pg.Pool({ connectionString: process.env.DATABASE_URL }) })
   */
  pool?: IdempotencyPool;
  /**
   * The app's TypeORM `DataSource` (PostgreSQL), for the default `PostgresIdempotencyStore` on
   * its pool. Initialized by the module if it is not yet. Transactional handlers get a TypeORM
   * `EntityManager` as `idem.manager`. Exactly one of `pool`, `dataSource` and `store` is required.
   * @default undefined
   * @example IdempotencyModule.forRootAsync({ inject: [DataSource], useFactory: (dataSource) => ({ dataSource }) })
   */
  dataSource?: DataSource;
  /**
   * What transactional handlers write through (`idem.manager`): an adapter that binds the
   * store's `TransactionClient` (the connection in the record's transaction) to your tool's API,
   * or just that function `(client) => manager`. Not used with a custom `store`.
   * @default undefined (pgTransactions() with `pool`, typeormTransactions(dataSource) with `dataSource`)
   * @example IdempotencyModule.forRoot({ pool, transactions: typeormTransactions(dataSource) })
   */
  transactions?: TransactionAdapterLike;
  /**
   * Another store in place of the PostgreSQL one (then `pool`, `dataSource`, `tableName`, `encryption`
   * and `statementTimeoutMs` are not used, and the schema check does not run). Transactional
   * routes need a store with `beginTransaction()`: start-up fails otherwise.
   * @default undefined (a PostgresIdempotencyStore on `pool` or `dataSource`)
   * @example
   * // in unit tests: import { InMemoryIdempotencyStore } from 'nestjs-pg-idempotency/testing'
   * IdempotencyModule.forRoot({ store: new InMemoryIdempotencyStore() })
   */
  store?: IdempotencyStore;
  /**
   * How long a completed response is replayed, counted from completion.
   * @default 86400 (24 hours)
   */
  ttlSeconds?: number;
  /**
   * Scopes keys per user: one user's key never reaches another user's record. Requests without
   * a user (`null`/`undefined`) share the anonymous scope `''`. When `req.user` is set but no id
   * comes out, or the id is not a string, number or bigint (e.g. the whole user object), the
   * request is refused with `500 idempotency_misconfigured` (logged once per route) rather than
   * share a scope with other users. Ids longer than 255 characters or containing control
   * characters are refused with `400 idempotency_user_invalid`. Read it from what your guard
   * authenticated, never from a header the client sets: that client could name another user's
   * scope and be replayed their stored responses.
   * @default (req) => req.user?.id ?? req.user?.sub ?? req.user?.userId
   * @example (req) => req.user && `${req.user.tenantId}:${req.user.id}`
   */
  getUserId?: (req: IdempotencyRequest) => string | number | bigint | null | undefined;
  /**
   * Request header that carries the key (HTTP, GraphQL; on NATS the message header).
   * @default 'Idempotency-Key'
   * @example 'X-Idempotency-Key'
   */
  headerName?: string;
  /**
   * Lease of an in-progress claim. While the handler runs the lease is renewed every third of it;
   * a crashed process stops renewing, so its key can be taken over once the lease ran out.
   * @default 60
   */
  leaseSeconds?: number;
  /**
   * Longest time a single handler keeps its claim alive by renewing the lease.
   * @default 300
   */
  maxHoldSeconds?: number;
  /**
   * Seconds sent in `Retry-After` with `409 request_in_progress`: a whole number, at least 1.
   * @default 2
   */
  retryAfterSeconds?: number;
  /**
   * Response headers stored and replayed (case-insensitive). `Set-Cookie` is never stored.
   * @default ['content-type', 'content-language', 'content-disposition', 'location', 'link', 'etag', 'content-encoding', 'cache-control', 'vary']
   */
  replayHeaders?: string[];
  /**
   * Largest response body stored for replay. A larger response is still sent; its record is
   * completed without a body, and retries get `409 idempotency_response_not_replayable`.
   * @default 1048576 (1 MiB)
   */
  maxResponseBytes?: number;
  /**
   * Which outcomes are stored and replayed. Any other outcome of a handler that threw releases
   * the key so a retry runs again; one of a handler that returned is completed without a body
   * (retries get `409 idempotency_response_not_replayable`), never run twice.
   * `status` is the one the client receives (after the app's exception filters), so a domain error
   * a filter maps to 402 is kept like an `HttpException(402)`. A `304` (a conditional request
   * answered from an ETag) is asked as 304: kept, as by default, it completes the key without a
   * body, and retries get `409 idempotency_response_not_replayable`.
   * @default (status) => status < 500 && status !== 400 && status !== 422
   * @example (status) => status < 500 // also keep validation errors
   */
  storeIf?: StoreIfFn;
  /**
   * What of the body goes into the SHA-256 fingerprint; a Promise is awaited. The method, route
   * pattern, route params, parsed query, host name (host-param routes), the controller's hosts, the
   * handler's version and uploaded files (multer's `req.file`/`req.files`) are always in it.
   * @default (req) => req.body
   * @example (req) => ({ amount: req.body.amount, currency: req.body.currency })
   */
  fingerprint?: (req: IdempotencyRequest) => unknown;
  /**
   * Where an RPC (microservice) message carries its idempotency key: `data` is the payload,
   * `context` the transport's context (`TcpContext`, `NatsContext`, `RmqContext`...), for
   * transports with headers. Return nothing for a message without a key.
   * @default (data) => data?.idempotencyKey
   * @example (data, ctx) => ctx.getHeaders?.()?.get('Idempotency-Key') // NATS headers
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  getRpcKey?: (data: any, context: any) => unknown;
  /**
   * The user (tenant, calling service) an RPC message belongs to, scoping its key as `getUserId`
   * does for HTTP: one user's key never reaches another's record. `data` is the payload,
   * `context` the transport's context. Nothing (`null`/`undefined`) is the shared scope `''`;
   * anything but a string, number or bigint is refused (`idempotency_misconfigured`).
   * @default () => undefined
   * @example (data, ctx) => data?.tenantId
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  getRpcUserId?: (data: any, context: any) => string | number | bigint | null | undefined;
  /**
   * Called when an attempt at a microservice message is answered without running its handler:
   * a replay of the stored outcome, or a refusal (in progress, mismatch, store unavailable, a bad
   * key...). With manual acknowledgement (RabbitMQ `noAck: false`, the handler calling
   * `channel.ack`), such a message is otherwise never settled, and the broker stops delivering
   * once `prefetchCount` messages wait unacknowledged. Called before the answer goes back, once
   * per attempt (an app's `retry()` makes several); a Promise is awaited; what it throws is
   * logged, and the answer goes back as it would have. Settle each message once, through one helper
   * shared with the handlers (RabbitMQ closes the channel on a second ack); requeue an event that
   * is not decided yet (it has no caller to retry it if the run it waits for dies), and ack a
   * message: its caller got the answer, and a requeued message would run with nobody waiting.
   * See docs/graphql-and-rpc.md, "RabbitMQ: manual acknowledgement".
   * @default undefined (nothing is called)
   * @example ({ context, kind, code }) =>
   *   kind === 'event' && (code === 'request_in_progress' || code === 'idempotency_store_unavailable')
   *     ? setTimeout(() => settleOnce(context, { requeue: true }), 1000) // decided later
   *     : settleOnce(context) // answered: ack (see docs/graphql-and-rpc.md)
   */
  onRpcWithoutHandler?: (event: RpcWithoutHandlerEvent) => void | Promise<void>;
  /**
   * Status for a key reused with a different request: 409 (Stripe) or 422 (IETF draft).
   * @default 409
   */
  mismatchStatus?: 409 | 422;
  /**
   * Table holding the records, optionally schema-qualified.
   * @default 'idempotency_keys'
   */
  tableName?: string;
  /**
   * Audit of replays: `'batched'` counts replays per record in memory and writes, once per
   * `replayAuditFlushMs`, one row per record replayed to `idempotency_keys_replays` (its
   * `replay_count`, `first_replayed_at`, `replayed_at` = the last; never across UTC midnight) and
   * bumps the record's `replay_count`/`last_replayed_at` (a crash loses at most that window).
   * Refusals (`409` in progress, key-reuse mismatches, responses not replayable) are counted and
   * written the same way, one row per record and kind, to `idempotency_keys_refusals`.
   * `'off'` records nothing.
   * @default 'batched'
   */
  replayAudit?: 'batched' | 'off';
  /**
   * How often buffered replay events are written.
   * @default 1000
   */
  replayAuditFlushMs?: number;
  /**
   * Most records whose replays are held in memory waiting to be written (buffered plus the batch
   * being written; more replays of a record already held cost nothing). Once half of them wait
   * (at least 1 000), they are written without waiting for the interval. While PostgreSQL is slow
   * or unreachable, replays of further records are dropped and counted, with one warning per
   * flush interval saying how many.
   * @default 10000
   * @example 50_000 // more room for a long outage, ~150 bytes per record
   */
  replayAuditMaxBuffered?: number;
  /**
   * Client-side deadline, in milliseconds, on each of the library's own statements (claim,
   * completion, release, lease renewal, replay audit, cleanup batches), including the wait for a
   * pool connection. A database that accepts connections but does not answer then fails the
   * request with `503 idempotency_store_unavailable` instead of holding it forever; the connection
   * of a timed-out statement is closed, never reused. Not a server-side `statement_timeout`: it
   * also fires when the TCP peer hangs.
   * @default 5000
   * @example 2000 // clients that retry after 2 s should not wait longer than that for a 503
   */
  statementTimeoutMs?: number;
  /**
   * Send the library's statements as named prepared statements (parsed once per connection).
   * Behind a transaction pooler that does not track them (PgBouncer in `pool_mode = transaction`
   * before 1.21, or with `max_prepared_statements = 0`), set `false`: every statement is then sent
   * unnamed, which works on any server connection. Start-up is refused when such a pooler is
   * detected with this on.
   * @default true
   * @example false // PgBouncer 1.18-1.23 in transaction pooling mode
   */
  preparedStatements?: boolean;
  /**
   * Longest time, in seconds, a single-commit transaction (`transactional: 'single'`) may stay
   * open, from the claim to its `COMMIT`. Past it the transaction is rolled back (a statement the
   * handler is running in it is cancelled with its session), the key is free at once, and the
   * client gets `503 idempotency_store_unavailable` saying so; the handler's later result is
   * discarded. It bounds how long a hung handler holds a pool connection and the scope's lock.
   * @default 60
   * @example 10 // payment handlers that answer within seconds
   */
  singleCommitMaxSeconds?: number;
  /**
   * Completed responses kept in memory so a repeated replay needs no round trip. Entries die
   * before the record expires (measured by the database clock) and after `ttlSeconds` at most;
   * `false` turns it off (every replay then reads PostgreSQL once).
   * @default { maxEntries: 10000, maxBytes: 33554432, ttlSeconds: 60 }
   */
  replayCache?: false | { maxEntries?: number; maxBytes?: number; ttlSeconds?: number };
  /**
   * Encrypts stored responses at rest: the replayed headers and the body are sealed together into
   * `response_raw` with AES-256-GCM under the active key, `response_headers` and the queryable
   * `response_body` copy are not written. A row sealed with a key id that is no longer listed
   * is not replayed (`409 idempotency_response_not_replayable`, and an error is logged).
   * Start-up fails when a key is not 32 bytes or `activeKeyId` is not listed.
   * @default undefined (responses are stored in plaintext)
   * @example { keys: { '2026-12': process.env.IDEM_KEY_2026_12! }, activeKeyId: '2026-12' }
   */
  encryption?: IdempotencyEncryptionOptions;
  /**
   * The secret `ctx.keyFor(name)` derives downstream idempotency keys with (HMAC-SHA256 of the
   * record's key, endpoint, user and `name`): at least 32 bytes, the same on every instance and
   * kept across deploys (a new secret gives new keys, so a retry after the change is not
   * deduplicated downstream). Without it `keyFor()` throws. See docs/recovery-points.md.
   * @default undefined (`ctx.keyFor()` unavailable)
   * @example process.env.IDEMPOTENCY_DERIVED_KEY_SECRET
   */
  derivedKeySecret?: string | Buffer;
  /** Cleanup of expired records. */
  cleanup?: IdempotencyCleanupOptions;
}
