import {
  type CallHandler,
  type ExecutionContext,
  Inject,
  Injectable,
  Logger,
  type NestInterceptor,
} from '@nestjs/common';
import { Observable, of, type Subscription } from 'rxjs';
import { IDEMPOTENCY_STORE, ProblemCode, REPLAYED_HEADER } from '../idempotency.constants.js';
import { IDEMPOTENCY_RESOLVED_OPTIONS } from '../idempotency-internal.constants.js';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import {
  IdempotencyProblemException,
  NOT_REPLAYABLE_DETAILS,
  type ProblemOptions,
} from '../idempotency.problems.js';
import { setProblemHeadersOnRender } from './problem-headers.js';
import { InvalidIdempotencyKeyError, parseIdempotencyKey } from './idempotency-key.parser.js';
import { IdempotencyCoordinator, type RejectCode } from '../execution/idempotency.coordinator.js';
import type { OutcomeCapture } from '../execution/handler-outcome.js';
import { holdResponse } from './response-capture.js';
import { IdempotentRouteResolver, type IdempotentRoute } from './idempotent-route.resolver.js';
import {
  hasBody,
  hijack,
  type PlatformResponse,
  rawHeaders,
  rawResponse,
  routeEndpoint,
} from './http-adapter.utils.js';
import type { IdempotencyRequest } from '../interfaces/idempotency-module-options.interface.js';
import type { IdempotencyStore, StoredResponse } from '../store/idempotency-store.interface.js';
import { RequestRefusedError } from './request-refused.error.js';
import { RequestScope } from './request-scope.js';
import { ReplayAuditService } from '../execution/replay-audit.service.js';
import { ReplayCache } from '../execution/replay-cache.js';
import { ValueIdempotency } from '../transports/value-idempotency.js';
import { substituteResponse, writeStoredResponse } from './response-replay.js';

const HANDLED = Symbol('nestjs-pg-idempotency:handled');

/**
 * HTTP glue: reads the key, asks the store to claim it, and either replays, refuses, or runs
 * the handler under the claim. Routes without `@Idempotent()` pass straight through.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');
  private readonly routes: IdempotentRouteResolver;
  private readonly requests: RequestScope;
  private readonly coordinator: IdempotencyCoordinator;
  private readonly values: ValueIdempotency;

  constructor(
    @Inject(IDEMPOTENCY_RESOLVED_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_STORE) store: IdempotencyStore,
    audit: ReplayAuditService,
    cache: ReplayCache,
  ) {
    this.routes = new IdempotentRouteResolver(options);
    this.requests = new RequestScope(options.getUserId, this.logger);
    this.coordinator = new IdempotencyCoordinator(options, store, audit, cache, this.logger);
    this.values = new ValueIdempotency(options, this.coordinator, this.logger);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const route = this.routes.resolve(context);
    if (route === null) return next.handle();
    const type = context.getType<string>();
    if (type === 'graphql' || type === 'rpc') return this.values.intercept(context, route, next);
    if (type !== 'http') return next.handle();
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
    return new Observable((subscriber) => {
      let closed = false;
      let inner: Subscription | undefined;
      this.claimAndRoute(route, req, res, claimedKey, next).then(
        (routed) => {
          // The caller gave up while the claim was in flight (a timeout): never leave it claimed.
          if (closed) return void routed.cancel?.();
          inner = routed.result.subscribe(subscriber);
        },
        (err: unknown) => subscriber.error(err),
      );
      return () => {
        closed = true;
        inner?.unsubscribe();
      };
    });
  }

  private async claimAndRoute(
    route: IdempotentRoute,
    req: IdempotencyRequest,
    res: PlatformResponse,
    key: string,
    next: CallHandler,
  ): Promise<{ result: Observable<unknown>; cancel?: () => Promise<void> }> {
    const endpoint = route.endpoint ?? routeEndpoint(req);
    const userId = await this.refusing(res, () => this.requests.userId(req, endpoint));
    const selected = this.options.fingerprint(req);
    if (selected === undefined && hasBody(req)) {
      // A body nothing parsed cannot be compared: reusing the key with another body would replay.
      throw this.problem(res, 415, ProblemCode.BodyUnreadable);
    }
    const requestHash = await this.refusing(res, () =>
      this.requests.fingerprint(req, endpoint, selected),
    );
    const decision = await this.coordinator.decide({
      scope: { key, endpoint, userId },
      requestHash,
      route,
    });
    switch (decision.type) {
      case 'replay':
        return { result: this.replay(route, res, decision.response) };
      case 'reject':
        throw this.reject(res, decision.code);
      case 'execute': {
        const { execution } = decision;
        const raw = rawResponse(res);
        const hold: OutcomeCapture = (handled, hooks) => {
          holdResponse(raw, this.options.replayHeaders, hooks);
          return handled;
        };
        return { result: execution.run(req, next, hold), cancel: () => execution.cancel() };
      }
    }
  }

  private reject(res: PlatformResponse, code: RejectCode): IdempotencyProblemException {
    if (code === ProblemCode.Mismatch) return this.problem(res, this.options.mismatchStatus, code);
    return this.problem(res, code === ProblemCode.InProgress ? 409 : 503, code, this.retryAfter);
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

  /** Who or what the request is could not be told: answered as a problem, nothing claimed. */
  private async refusing<T>(res: PlatformResponse, work: () => T | Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (!(err instanceof RequestRefusedError)) throw err;
      throw this.problem(res, err.status, err.code, { detail: err.message });
    }
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
    const problem = new IdempotencyProblemException(status, code, options);
    setProblemHeadersOnRender(rawResponse(res), problem);
    return problem;
  }
}
