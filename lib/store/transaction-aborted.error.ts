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

/** `err`, or what it wraps (an ORM's query error: `driverError`, `cause`), when that is one. */
export function transactionAborted(err: unknown): TransactionAbortedError | undefined {
  for (let e = err, depth = 0; e && typeof e === 'object' && depth < 4; depth++) {
    if (e instanceof TransactionAbortedError) return e;
    const wrapper = e as {
      driverError?: unknown;
      cause?: unknown;
      detail?: unknown;
      message?: unknown;
    };
    // Copied rather than wrapped (MikroORM's DriverException takes the original's own properties).
    const { detail, message } = wrapper;
    if (typeof detail === 'string' && message === `nestjs-pg-idempotency: ${detail}`) {
      return new TransactionAbortedError(detail);
    }
    e = wrapper.driverError ?? wrapper.cause;
  }
  return undefined;
}
