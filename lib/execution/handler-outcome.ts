import type { Observable } from 'rxjs';

/** A handler's outcome as its caller receives it: an HTTP response, or a JSON-encoded value. */
export interface WireResponse {
  statusCode: number;
  /** Only the allow-listed headers, lower-cased. */
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Why the outcome of a handler that ran cannot be kept for replay: the response is a stream,
 * the value cannot be encoded (a `BigInt`, a cycle), or the transport could not record it.
 */
export type UncapturableReason =
  'streamed' | 'unencodable' | 'unrecorded' | 'conditional' | 'not_kept';

/** What the transport reports to a running execution. */
export interface HoldHooks {
  /** Runs before the outcome reaches the caller; the caller waits for it. */
  onEnd(response: WireResponse): Promise<WireResponse | void>;
  /**
   * The handler ran but its outcome cannot be captured: the key is completed without a body
   * (retries get `409 idempotency_response_not_replayable` with `original_status`), never freed
   * for a second run. Resolves before the caller gets anything (for a stream: before its first
   * byte); a replacement, when given, is sent instead (its transaction rolled back).
   */
  onUncapturable(statusCode: number, reason: UncapturableReason): Promise<WireResponse | void>;
  /**
   * The handler failed and no response carries its error (GraphQL, RPC): nothing is stored.
   * 'kept' when the key is kept for a resumed run: the caller is told the store is unavailable.
   */
  onFailure(error: unknown): Promise<'kept' | void>;
}

/**
 * For a transport (HTTP capture, GraphQL/RPC encoder) whose outcome cannot be captured after the
 * handler ran: records that it ran, with `statusCode`, so a retry never runs it again. Never
 * rejects; resolves to the replacement to send instead, if any.
 */
export function uncapturable(
  hooks: Pick<HoldHooks, 'onUncapturable'>,
  statusCode: number,
  reason: UncapturableReason,
): Promise<WireResponse | void> {
  return hooks.onUncapturable(statusCode, reason).catch(() => undefined);
}

/**
 * How a transport captures the outcome: HTTP holds the response at the socket; GraphQL and RPC
 * encode the returned value. Returns what the caller subscribes to.
 */
export type OutcomeCapture = (
  handled: Observable<unknown>,
  hooks: HoldHooks,
) => Observable<unknown>;
