import {
  type CallHandler,
  type ExecutionContext,
  Inject,
  Injectable,
  Logger,
  type NestInterceptor,
} from '@nestjs/common';
import { defer, from, mergeMap, type Observable, of } from 'rxjs';
import {
  IDEMPOTENCY_RESOLVED_OPTIONS,
  IDEMPOTENCY_STORE,
  ProblemCode,
  REPLAYED_HEADER,
} from './idempotency.constants.js';
import type { ResolvedIdempotencyOptions } from './idempotency.defaults.js';
import {
  IdempotencyProblemException,
  NOT_REPLAYABLE_DETAILS,
  PROBLEM_CONTENT_TYPE,
  type ProblemOptions,
} from './idempotency.problems.js';
import { InvalidIdempotencyKeyError, parseIdempotencyKey } from './idempotency-key.parser.js';
import { IdempotentExecution } from './idempotent.execution.js';
import { IdempotentRouteResolver, type IdempotentRoute } from './idempotent-route.resolver.js';
import {
  hasBody,
  hijack,
  type PlatformResponse,
  rawHeaders,
  rawResponse,
  requestPath,
  routeEndpoint,
  setResponseHeader,
} from './http-adapter.utils.js';
import type { IdempotencyRequest } from './interfaces/idempotency-module-options.interface.js';
import type { IdempotencyStore, StoredResponse } from './interfaces/idempotency-store.interface.js';
import { fingerprintRequest } from './request-fingerprint.js';
import { ReplayAuditService } from './replay-audit.service.js';
import { ReplayCache } from './replay-cache.js';
import { substituteResponse, writeStoredResponse } from './response-capture.js';

const HANDLED = Symbol('nestjs-pg-idempotency:handled');

/**
 * HTTP glue: reads the key, asks the store to claim it, and either replays, refuses, or runs
 * the handler under the claim. Routes without `@Idempotent()` pass straight through.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');
  private readonly routes: IdempotentRouteResolver;

  constructor(
    @Inject(IDEMPOTENCY_RESOLVED_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
    private readonly audit: ReplayAuditService,
    private readonly cache: ReplayCache,
  ) {
    this.routes = new IdempotentRouteResolver(options);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    const route = this.routes.resolve(context);
    if (route === null) return next.handle();
    const http = context.switchToHttp();
    const req = http.getRequest();
    const res = http.getResponse();
    // A controller-level and a method-level @Idempotent() both attach this interceptor: once only.
    if (req[HANDLED]) return next.handle();
    req[HANDLED] = true;

    let key: string | undefined;
    try {
      key = parseIdempotencyKey(rawHeaders(req), this.options.headerName);
    } catch (err) {
      if (!(err instanceof InvalidIdempotencyKeyError)) throw err;
      throw this.problem(res, 400, ProblemCode.KeyInvalid, { detail: err.message });
    }
    if (key === undefined) {
      if (!route.required) return next.handle();
      throw this.problem(res, 400, ProblemCode.KeyMissing);
    }
    const claimedKey = key;
    return defer(() => from(this.claimAndRoute(route, req, res, claimedKey, next))).pipe(
      mergeMap((result) => result),
    );
  }

  private async claimAndRoute(
    route: IdempotentRoute,
    req: IdempotencyRequest,
    res: PlatformResponse,
    key: string,
    next: CallHandler,
  ): Promise<Observable<unknown>> {
    const userId = this.options.getUserId(req);
    const scope = {
      key,
      endpoint: route.endpoint ?? routeEndpoint(req),
      userId: userId === undefined || userId === null ? '' : String(userId),
    };
    const selected = this.options.fingerprint(req);
    if (selected === undefined && hasBody(req)) {
      // A body nothing parsed cannot be compared: reusing the key with another body would replay.
      throw this.problem(res, 415, ProblemCode.BodyUnreadable);
    }
    const requestHash = fingerprintRequest(req.method, requestPath(req), selected);
    const cacheKey = ReplayCache.scopeKey(scope.userId, scope.endpoint, key);
    const cached = this.cache.get(cacheKey, requestHash);
    if (cached) {
      this.audit.record(cached.recordId, cached.expiresAt);
      return this.replay(route, res, cached.response);
    }
    let outcome;
    try {
      outcome = await this.store.claim({
        ...scope,
        requestHash,
        ttlSeconds: route.ttlSeconds,
        leaseSeconds: this.options.leaseSeconds,
      });
    } catch (err) {
      this.logger.error(
        `Idempotency store unavailable; refusing ${scope.endpoint}: ${(err as Error).message}`,
      );
      throw this.problem(res, 503, ProblemCode.StoreUnavailable, this.retryAfter);
    }
    switch (outcome.type) {
      case 'in_progress':
        throw this.problem(res, 409, ProblemCode.InProgress, this.retryAfter);
      case 'mismatch':
        throw this.problem(res, this.options.mismatchStatus, ProblemCode.Mismatch);
      case 'completed':
        this.audit.record(outcome.recordId, outcome.expiresAt);
        this.cache.set(cacheKey, { ...outcome, requestHash }, outcome.secondsLeft);
        return this.replay(route, res, outcome.response);
      case 'claimed':
        return new IdempotentExecution(
          this.options,
          this.store,
          this.logger,
          route,
          scope,
          outcome.lease,
          (response) =>
            this.cache.set(
              cacheKey,
              {
                requestHash,
                recordId: outcome.lease.id,
                expiresAt: new Date(Date.now() + route.ttlSeconds * 1000),
                response,
              },
              route.ttlSeconds,
            ),
        ).run(req, rawResponse(res), next);
    }
  }

  private replay(
    route: IdempotentRoute,
    res: PlatformResponse,
    stored: StoredResponse,
  ): Observable<unknown> {
    if (stored.body === null) {
      throw this.problem(res, 409, ProblemCode.NotReplayable, {
        detail: NOT_REPLAYABLE_DETAILS[stored.omitted ?? 'too_large'],
        extensions: { original_status: stored.statusCode },
      });
    }
    if (route.ownsResponse) {
      hijack(res);
      writeStoredResponse(rawResponse(res), stored, REPLAYED_HEADER);
    } else {
      substituteResponse(rawResponse(res), stored, REPLAYED_HEADER);
    }
    return of(undefined);
  }

  private get retryAfter(): ProblemOptions {
    return { headers: { 'Retry-After': String(this.options.retryAfterSeconds) } };
  }

  private problem(
    res: PlatformResponse,
    status: number,
    code: ProblemCode,
    options: ProblemOptions = {},
  ): IdempotencyProblemException {
    setResponseHeader(res, 'Content-Type', PROBLEM_CONTENT_TYPE);
    for (const [name, value] of Object.entries(options.headers ?? {})) {
      setResponseHeader(res, name, value);
    }
    return new IdempotencyProblemException(status, code, options);
  }
}
