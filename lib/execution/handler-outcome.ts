import type { Observable } from 'rxjs';

/** A handler's outcome as its caller receives it: an HTTP response, or a JSON-encoded value. */
export interface WireResponse {
  statusCode: number;
  /** Only the allow-listed headers, lower-cased. */
  headers: Record<string, string>;
  body: Buffer;
}

/** What the transport reports to a running execution. */
export interface HoldHooks {
  /** Runs before the outcome reaches the caller; the caller waits for it. */
  onEnd(response: WireResponse): Promise<WireResponse | void>;
  /**
   * The handler streams (writes before ending): nothing can be stored. Resolves before the first
   * byte leaves; a replacement is sent instead of the stream.
   */
  onStream(): Promise<WireResponse | void>;
  /** The handler failed and no response carries its error (GraphQL, RPC): nothing is stored. */
  onFailure(error: unknown): Promise<void>;
}

/**
 * How a transport captures the outcome: HTTP holds the response at the socket; GraphQL and RPC
 * encode the returned value. Returns what the caller subscribes to.
 */
export type OutcomeCapture = (
  handled: Observable<unknown>,
  hooks: HoldHooks,
) => Observable<unknown>;
