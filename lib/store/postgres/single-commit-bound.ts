import { TransactionAbortedError } from '../transaction-aborted.error.js';
import { type PoolClient, type Queryable, queryWithin } from './pg-deadline.js';

export interface SingleCommitLimits {
  /** Deadline of each statement. */
  timeoutMs: number;
  /** Past this, the transaction is aborted (see `watchSingleCommit`). */
  maxSeconds: number;
  /**
   * Ends the backend of the transaction, busy with the handler's statement, if that transaction
   * is still open (the backend's pid as the server knows it, never the client's `processID`).
   */
  terminate(): Promise<unknown>;
  /** Runs once, when the transaction ended, whichever way, and its connection went back. */
  onEnd(): void;
}

/** Why a single-commit transaction was aborted: its time bound, or its connection's failure. */
export type AbortCause = 'bound' | Error;

const NOTHING_COMMITTED =
  'The operation was rolled back, nothing was committed; retry with the same key';

/** What the client is told; the session's own error is logged, not sent. */
export function abortedError(cause: AbortCause, maxSeconds: number): TransactionAbortedError {
  if (cause === 'bound') {
    return new TransactionAbortedError(
      `${NOTHING_COMMITTED}. Its transaction stayed open longer than singleCommitMaxSeconds (${maxSeconds} s)`,
    );
  }
  if ((cause as { code?: string }).code === '25P03') {
    return new TransactionAbortedError(
      `${NOTHING_COMMITTED}. PostgreSQL ended its transaction, idle longer than idle_in_transaction_session_timeout: a handler in a single-commit transaction must not stay idle in it that long`,
    );
  }
  return new TransactionAbortedError(
    `${NOTHING_COMMITTED}. The connection of its transaction was lost before COMMIT`,
  );
}

/**
 * Calls `abort` once, when the transaction has been open `maxMs` or its connection fails (the
 * server ended the session: `idle_in_transaction_session_timeout`, a terminated backend, a lost
 * socket). `stop` ends the watch: call it before COMMIT or ROLLBACK is sent; `lost` reports a
 * session loss seen by a statement.
 */
export function watchSingleCommit(
  client: PoolClient,
  maxMs: number,
  abort: (cause: AbortCause) => void,
): { stop: () => void; lost: (err: Error) => void } {
  let watching = true;
  const stop = () => {
    if (!watching) return;
    watching = false;
    clearTimeout(timer);
    client.removeListener('error', fire);
  };
  function fire(cause: AbortCause) {
    if (!watching) return;
    stop();
    abort(cause);
  }
  const timer = setTimeout(() => fire('bound'), maxMs);
  client.on('error', fire);
  return { stop, lost: fire };
}

/**
 * The connection as the handler's runner sees it: a statement that fails because the session is
 * gone (a FATAL from the server, a dropped socket) reports the loss before the handler sees the
 * error, so the request answers 503 (nothing committed), not the handler's 500.
 */
export function reportingSessionLoss(
  client: PoolClient,
  lost: (err: Error) => void,
): Queryable & { end(): Promise<void> } {
  const query = (...args: unknown[]): unknown => {
    const result = (client.query as (...a: unknown[]) => unknown)(...args);
    if (typeof (result as Promise<unknown> | undefined)?.then !== 'function') return result;
    return (result as Promise<unknown>).catch((err: Error) => {
      if (sessionGone(client, err)) lost(err);
      throw err;
    });
  };
  // A new object, not one inheriting from the client: a pooled connection made the prototype of
  // a per-request object is turned into a prototype map, and every later access to it slows.
  const end = () => (client as unknown as { end(): Promise<void> }).end();
  return { query, end } as Queryable & { end(): Promise<void> };
}

/** The statement failed because the session is gone (see `reportingSessionLoss`). */
export function sessionGone(client: PoolClient, err: Error): boolean {
  const severity = (err as { severity?: string }).severity;
  const pg = client as unknown as { _queryable?: boolean; _ending?: boolean };
  return severity === 'FATAL' || severity === 'PANIC' || pg._queryable === false || !!pg._ending;
}

/**
 * Ends an aborted transaction so its locks go at once: a lost session is gone already; an idle one
 * is rolled back; one running a statement of the handler has its backend terminated.
 */
export async function abortTransaction(
  client: PoolClient,
  cause: AbortCause,
  limits: Pick<SingleCommitLimits, 'timeoutMs' | 'terminate'>,
  close: (failed?: Error) => void,
): Promise<void> {
  if (cause !== 'bound') return close(cause);
  if (isIdle(client)) {
    return queryWithin(client, { text: 'ROLLBACK', values: [] }, limits.timeoutMs).then(
      () => close(),
      (err: Error) => close(err),
    );
  }
  await limits.terminate().catch(() => undefined);
  close(new Error('aborted past singleCommitMaxSeconds'));
}

/** No statement of the handler is running or queued on the client: a ROLLBACK answers at once. */
function isIdle(client: PoolClient): boolean {
  const pg = client as unknown as { _getActiveQuery?(): unknown; _queryQueue?: unknown[] };
  return !pg._getActiveQuery?.() && (pg._queryQueue?.length ?? 0) === 0;
}
