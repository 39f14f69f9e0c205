import { ProblemCode } from '../../idempotency.constants.js';
import type { ResolvedIdempotencyOptions } from '../../idempotency.defaults.js';
import { IdempotencyProblemException, type ProblemOptions } from '../../idempotency.problems.js';
import type { RejectCode } from '../../execution/idempotency.coordinator.js';
import { type PlatformResponse, rawResponse } from '../../request/http-adapter.utils.js';
import { setProblemHeadersOnRender } from './problem-headers.js';
import { RequestRefusedError } from '../../request/request-refused.error.js';
import { rejectStatus } from '../../request/reject-status.js';

/** Refusals as RFC 9457 problem responses, with their headers set on the response. */
export class HttpRefusals {
  constructor(private readonly options: ResolvedIdempotencyOptions) {}

  /** The coordinator's refusal: 409 in progress, the mismatch status, 404 nothing to replay, or 503 (fail closed). */
  reject(res: PlatformResponse, code: RejectCode): IdempotencyProblemException {
    const { status, retry } = rejectStatus(code, this.options.mismatchStatus);
    return this.problem(res, status, code, retry ? this.retryAfter : {});
  }

  /**
   * Who or what the request is could not be told: answered as a problem, nothing claimed.
   * Synchronous work stays synchronous (no await on a cached replay).
   */
  refusing<T>(res: PlatformResponse, work: () => T): T {
    try {
      const result = work();
      if (!(result instanceof Promise)) return result;
      return result.catch((err: unknown) => this.refused(res, err)) as T;
    } catch (err) {
      return this.refused(res, err);
    }
  }

  private refused(res: PlatformResponse, err: unknown): never {
    if (!(err instanceof RequestRefusedError)) throw err;
    throw this.problem(res, err.status, err.code, { detail: err.message });
  }

  problem(
    res: PlatformResponse,
    status: number,
    code: ProblemCode,
    options: ProblemOptions = {},
  ): IdempotencyProblemException {
    const problem = new IdempotencyProblemException(status, code, options);
    setProblemHeadersOnRender(rawResponse(res), problem);
    return problem;
  }

  private get retryAfter(): ProblemOptions {
    return { headers: { 'Retry-After': String(this.options.retryAfterSeconds) } };
  }
}
