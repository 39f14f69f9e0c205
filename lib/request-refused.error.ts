import type { ProblemCode } from './idempotency.constants.js';

/**
 * Why a request's scope or fingerprint cannot be computed. `400`: the client's identity is
 * unusable (`detail` tells it why); `500`: the server's configuration is wrong (`message` is
 * logged, the client gets the generic detail).
 */
export class RequestRefusedError extends Error {
  constructor(
    readonly status: 400 | 500,
    readonly code: ProblemCode,
    message: string,
  ) {
    super(message);
  }

  get detail(): string | undefined {
    return this.status === 400 ? this.message : undefined;
  }
}
