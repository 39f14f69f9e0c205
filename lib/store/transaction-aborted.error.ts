/**
 * The store ended a handler's transaction on its own, before any COMMIT was sent (it stayed open
 * too long, or the server ended its session): nothing of it was committed. `detail` tells the
 * client why, in the 503 it gets instead of the handler's result.
 */
export class TransactionAbortedError extends Error {
  constructor(readonly detail: string) {
    super(`nestjs-pg-idempotency: ${detail}`);
  }
}
