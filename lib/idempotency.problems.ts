import { HttpException } from '@nestjs/common';
import { ProblemCode } from './idempotency.constants.js';
import { telemetry } from './telemetry/idempotency.telemetry.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

const TITLES: Record<ProblemCode, string> = {
  [ProblemCode.KeyMissing]: 'Idempotency-Key header required',
  [ProblemCode.KeyInvalid]: 'Invalid Idempotency-Key header',
  [ProblemCode.InProgress]: 'A request with this idempotency key is in progress',
  [ProblemCode.Mismatch]: 'Idempotency key reused with different request parameters',
  [ProblemCode.NotReplayable]: 'The original response cannot be replayed',
  [ProblemCode.StoreUnavailable]: 'Idempotency store unavailable',
  [ProblemCode.BodyUnreadable]: 'Request body cannot be fingerprinted',
  [ProblemCode.UserInvalid]: 'Invalid user id for the idempotency scope',
  [ProblemCode.Misconfigured]: 'Idempotency is misconfigured on this route',
  [ProblemCode.NothingToReplay]: 'Nothing to replay for this idempotency key',
};

/** The default `detail` of each problem; a call may give a more specific one. */
const DETAILS: Record<ProblemCode, string> = {
  [ProblemCode.KeyMissing]: 'This endpoint requires an Idempotency-Key header',
  [ProblemCode.KeyInvalid]: 'The Idempotency-Key header is not valid',
  [ProblemCode.InProgress]:
    'A request with this idempotency key is still being processed; retry after the delay in Retry-After',
  [ProblemCode.Mismatch]:
    'This idempotency key was already used with a different request; use a new key for a new operation',
  [ProblemCode.NotReplayable]:
    'The operation for this key already ran, but its response was not stored: it was too large, could not be captured or recorded, or another answer (such as a timeout) reached the client first',
  [ProblemCode.StoreUnavailable]:
    'The request was not processed because its idempotency key could not be checked; retry later with the same key',
  [ProblemCode.BodyUnreadable]:
    'The request body could not be read for the idempotency fingerprint; send JSON or form data, or configure the fingerprint option',
  [ProblemCode.UserInvalid]:
    'The authenticated user id cannot scope an idempotency key: at most 255 characters, no control characters',
  [ProblemCode.Misconfigured]:
    'The request was not processed because the server could not tell who or what it is for idempotency; the error is logged',
  [ProblemCode.NothingToReplay]:
    'A HEAD request only replays the headers of the GET already made with this key; no GET was made with it, and HEAD never runs the operation',
};

/** The `detail` of `idempotency_response_not_replayable`, by why the body was not kept. */
export const NOT_REPLAYABLE_DETAILS = {
  too_large: DETAILS[ProblemCode.NotReplayable],
  digest:
    'The operation for this key already ran; this endpoint keeps only a digest of its response, never the response itself',
  undecryptable:
    'The operation for this key already ran, but its stored response cannot be read back',
  streamed: 'The operation for this key already ran; its response was streamed and is not stored',
  unencodable:
    'The operation for this key already ran, but its result could not be encoded for storage',
  unrecorded:
    'The operation for this key already ran, but its response could not be recorded; only its status was',
  conditional:
    'The operation for this key already ran and was answered 304 Not Modified (a conditional request), so its body was not stored',
  not_kept:
    'The operation for this key already ran; its response was not kept for replay (storeIf), and it is never run again',
} as const;

export interface ProblemOptions {
  detail?: string;
  headers?: Record<string, string>;
  extensions?: Record<string, unknown>;
}

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
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    readonly code: ProblemCode,
    options: ProblemOptions = {},
  ) {
    const body: IdempotencyProblem = {
      type: `urn:nestjs-pg-idempotency:problem:${code}`,
      title: TITLES[code],
      status,
      detail: options.detail ?? DETAILS[code],
      code,
      ...options.extensions,
    };
    super(body, status);
    this.headers = options.headers ?? {};
    telemetry.refused(code, status);
  }
}
