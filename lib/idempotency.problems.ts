import { HttpException } from '@nestjs/common';
import { ProblemCode } from './idempotency.constants.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

const TITLES: Record<ProblemCode, string> = {
  [ProblemCode.KeyMissing]: 'Idempotency-Key header required',
  [ProblemCode.KeyInvalid]: 'Invalid Idempotency-Key header',
  [ProblemCode.InProgress]: 'A request with this idempotency key is in progress',
  [ProblemCode.Mismatch]: 'Idempotency key reused with different request parameters',
  [ProblemCode.NotReplayable]: 'The original response cannot be replayed',
  [ProblemCode.StoreUnavailable]: 'Idempotency store unavailable',
  [ProblemCode.BodyUnreadable]: 'Request body cannot be fingerprinted',
};

/** RFC 9457 problem details body; `code` is the stable, machine-readable part. */
export interface IdempotencyProblem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ProblemCode;
  [extension: string]: unknown;
}

/**
 * An error the library answers with. The default exception filter sends `getResponse()`;
 * the interceptor has already set `Content-Type: application/problem+json` (and `Retry-After`).
 */
export class IdempotencyProblemException extends HttpException {
  constructor(
    status: number,
    readonly code: ProblemCode,
    detail: string,
    readonly headers: Record<string, string> = {},
    extensions: Record<string, unknown> = {},
  ) {
    const body: IdempotencyProblem = {
      type: `urn:nestjs-pg-idempotency:problem:${code}`,
      title: TITLES[code],
      status,
      detail,
      code,
      ...extensions,
    };
    super(body, status);
  }
}
