import type { Logger } from '@nestjs/common';
import { ProblemCode } from '../idempotency.constants.js';
import type { IdempotencyRequest } from '../interfaces/idempotency-module-options.interface.js';
import { fingerprintRequest, UnhashableValueError } from '../execution/request-fingerprint.js';
import { RequestRefusedError } from './request-refused.error.js';
import { requestTarget, type RouteMarks } from './request-target.js';
import { defaultUserId } from '../idempotency.defaults.js';

/** Longest user id accepted, in characters (Unicode code points), like the key. */
export const MAX_USER_ID_LENGTH = 255;

const misconfigured = (message: string) =>
  new RequestRefusedError(500, ProblemCode.Misconfigured, message);
const invalid = (message: string) => new RequestRefusedError(400, ProblemCode.UserInvalid, message);

// NUL cannot be stored in text at all; other control characters (C0, DEL, C1) make ids that print
// alike, and a lone UTF-16 surrogate would be rewritten to U+FFFD on the way to PostgreSQL.
const UNSTORABLE = /[\p{Cc}\p{Cs}]/u;

/**
 * Turns what `getUserId` returned into the stored `user_id`. Nothing (`null`/`undefined`) is
 * the anonymous scope `''`, unless the request has a `req.user`: then a logged-in user would
 * share the anonymous scope, which is refused. Objects are refused rather than turned into
 * `"[object Object]"`, which every user would share.
 */
export function normalizeUserId(value: unknown, hasUser: boolean, customGetter = false): string {
  if (value === undefined || value === null) {
    if (!hasUser) return '';
    throw misconfigured(
      customGetter
        ? `req.user is set but the getUserId option returned ${value} for it; make it return the user's id, or leave getUserId out: the default reads req.user.id, .sub, then .userId`
        : 'req.user is set but getUserId found no user id in it (the default reads req.user.id, .sub, then .userId); set the getUserId option',
    );
  }
  let id: string;
  if (typeof value === 'string') id = value;
  else if (typeof value === 'bigint') id = value.toString();
  else if (typeof value === 'number' && Number.isFinite(value)) id = String(value);
  else {
    const what =
      typeof value === 'object'
        ? 'an object'
        : typeof value === 'number'
          ? 'a non-finite number'
          : `a ${typeof value}`;
    throw misconfigured(
      `getUserId returned ${what}; it must return a string, number or bigint, e.g. (req) => req.user.id`,
    );
  }
  if (id.length > MAX_USER_ID_LENGTH && [...id].length > MAX_USER_ID_LENGTH) {
    throw invalid(`The user id is longer than ${MAX_USER_ID_LENGTH} characters`);
  }
  if (UNSTORABLE.test(id))
    throw invalid('The user id contains control characters or invalid Unicode');
  return id;
}

/** Who a request belongs to and what it is; each configuration error is logged once per route. */
export class RequestScope {
  private readonly logged = new Set<string>();

  constructor(
    private readonly getUserId: (req: IdempotencyRequest) => unknown,
    private readonly logger: Logger,
  ) {}

  userId(req: IdempotencyRequest, endpoint: string): string {
    return this.logOnce(endpoint, () =>
      normalizeUserId(this.getUserId(req), Boolean(req.user), this.getUserId !== defaultUserId),
    );
  }

  /**
   * SHA-256 over the route, its params, the parsed query, the host name of a host-param route,
   * the controller's hosts, the handler's version, uploaded files and the selected body.
   * Synchronous unless uploads must be read, so a cached replay awaits nothing.
   */
  fingerprint(
    req: IdempotencyRequest,
    endpoint: string,
    selected: unknown,
    method: string = req.method,
    route: RouteMarks = {},
  ): string | Promise<string> {
    const target = this.logOnce(endpoint, () => requestTarget(req, method, route));
    if (typeof target === 'string') return this.hash(endpoint, method, target, selected);
    return target.then((t) => this.hash(endpoint, method, t, selected));
  }

  /** The fingerprint, or a 500 (logged once) where what was selected cannot be hashed. */
  private hash(endpoint: string, method: string, target: string, selected: unknown): string {
    try {
      return fingerprintRequest(method, target, selected);
    } catch (err) {
      if (!(err instanceof UnhashableValueError)) throw err;
      return this.rethrow(
        endpoint,
        misconfigured(
          `the request's fingerprint cannot be hashed: ${err.message}; make the fingerprint option return plain data`,
        ),
      );
    }
  }

  private logOnce<T>(endpoint: string, work: () => T): T {
    try {
      const result = work();
      if (result instanceof Promise) {
        return result.catch((err: unknown) => this.rethrow(endpoint, err)) as T;
      }
      return result;
    } catch (err) {
      return this.rethrow(endpoint, err);
    }
  }

  private rethrow(endpoint: string, err: unknown): never {
    const once = `${endpoint}\n${(err as Error)?.message}`;
    if (err instanceof RequestRefusedError && err.status === 500 && !this.logged.has(once)) {
      this.logged.add(once);
      this.logger.error(`Refusing ${endpoint}: ${err.message}`);
    }
    throw err;
  }
}
