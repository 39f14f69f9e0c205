import type { ProblemCode } from '../idempotency.constants.js';

/**
 * Why a request's scope or fingerprint cannot be computed: `400`, the client's identity is
 * unusable; `500`, the server's configuration is wrong (also logged, once per route). The message
 * is the problem's `detail` either way: it names options, never data of the request.
 */
export class RequestRefusedError extends Error {
  constructor(
    readonly status: 400 | 500,
    readonly code: ProblemCode,
    message: string,
  ) {
    super(message);
  }
}
