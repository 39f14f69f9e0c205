import type { IdempotencyRequest } from './idempotency-module-options.interface.js';

/** Per-route options of `@Idempotent()`; unset fields fall back to the module options. */
export interface IdempotentOptions {
  /**
   * Replay window of this route.
   * @default the module's `ttlSeconds`
   */
  ttlSeconds?: number;
  /**
   * Answer `400 idempotency_key_missing` when the header is absent, instead of running unprotected.
   * @default false
   */
  required?: boolean;
  /**
   * Scope name stored in `endpoint`; two routes with the same name share keys (a key used on
   * one is refused with 409 on the other, never answered with its response). At most 255
   * characters; a derived pattern longer than that is stored as its start, ` #` and its SHA-256.
   * @default '<METHOD> <route pattern>', e.g. 'POST /payments/:id/refunds'
   */
  endpoint?: string;
  /**
   * Derives the transaction id stored with the record from the response body as the client
   * received it (parsed JSON, or the raw text). A handler can also call `ctx.setTransactionId()`.
   * @example (body) => body?.id
   */
  transactionId?: (body: unknown, req: IdempotencyRequest) => string | number | null | undefined;
  /**
   * Runs the handler's own writes and the completion of the record in one PostgreSQL transaction:
   * the handler writes through `ctx.manager` (see `@IdempotencyCtx()`). If it throws, or the
   * process dies, its writes roll back with the completion and a retry starts clean.
   *
   * `true`: the claim itself stays a separate, immediately visible insert (three commits per
   * first call: claim, then handler writes + completion), kept alive by a lease.
   *
   * `'single'` (single-commit): the claim, the handler's writes and the completed record are ONE
   * transaction and one COMMIT; while it runs the scope's advisory lock refuses duplicates at
   * once (409), and a rollback, crash or lost connection frees the key at once (no lease). The
   * transaction holds a pool connection from the claim until the handler settles.
   * @default false
   * @example @Idempotent({ transactional: 'single' })
   */
  transactional?: boolean | 'single';
  /**
   * What is kept of the response. `'full'`: status, replayed headers and body, replayed
   * byte-identically. `'digest'`: only the status and a SHA-256 of the body (`response_digest`),
   * never the body or headers, for responses that must not rest in the database (card data,
   * personal data); a retry then gets `409 idempotency_response_not_replayable` with
   * `original_status` instead of the body, and the operation still never runs twice.
   * @default 'full'
   * @example @Idempotent({ storeResponse: 'digest' })
   */
  storeResponse?: 'full' | 'digest';
}
