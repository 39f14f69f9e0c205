import {
  type CallHandler,
  type ExecutionContext,
  Inject,
  Injectable,
  Logger,
  type NestInterceptor,
} from '@nestjs/common';
import { type Observable, of } from 'rxjs';
import { IDEMPOTENCY_STORE, ProblemCode, REPLAYED_HEADER } from '../idempotency.constants.js';
import { IDEMPOTENCY_RESOLVED_OPTIONS } from '../idempotency-internal.constants.js';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import { NOT_REPLAYABLE_DETAILS } from '../idempotency.problems.js';
import {
  InvalidIdempotencyKeyError,
  parseIdempotencyKey,
} from '../request/idempotency-key.parser.js';
import { IdempotencyCoordinator, type Replay } from '../execution/idempotency.coordinator.js';
import { afterDecision, type RoutedCall } from '../execution/routed-call.js';
import { HttpRefusals } from './http/http-refusals.js';
import type { OutcomeCapture } from '../execution/handler-outcome.js';
import { holdResponse } from './http/response-capture.js';
import {
  IdempotentRouteResolver,
  type IdempotentRoute,
} from '../execution/idempotent-route.resolver.js';
import {
  hasBody,
  hijack,
  type PlatformResponse,
  rawHeaders,
  rawResponse,
  routeEndpoint,
} from '../request/http-adapter.utils.js';
import type { IdempotencyRequest } from '../interfaces/idempotency-module-options.interface.js';
import type {
  IdempotencyScope,
  IdempotencyStore,
} from '../interfaces/idempotency-store.interface.js';
import { RequestScope } from '../request/request-scope.js';
import { replayOnly, scopeMethod } from './http/head-requests.js';
import { ReplayAuditService } from '../execution/replay-audit.service.js';
import { ReplayCache } from '../execution/replay-cache.js';
import { ValueIdempotency } from './value/value-idempotency.js';
import {
  adoptReplyHeaders,
  silencePlatformReply,
  writeStoredResponse,
} from './http/response-replay.js';

const HANDLED = Symbol('nestjs-pg-idempotency:handled');

/**
 * Translates HTTP to the coordinator and its decisions back to HTTP: reads the key and the
 * request, then writes the replay, the problem response, or holds the handler's response while
 * it is stored. GraphQL resolvers and RPC handlers go to `ValueIdempotency`. Routes without
 * `@Idempotent()` pass straight through.
 */
@Injectable()
export class IdempotencyInterceptor implements NestInterceptor {
  private readonly logger = new Logger('Idempotency');
  private readonly routes: IdempotentRouteResolver;
  private readonly requests: RequestScope;
  private readonly coordinator: IdempotencyCoordinator;
  private readonly values: ValueIdempotency;
  private readonly refusals: HttpRefusals;

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
    this.refusals = new HttpRefusals(options);
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
      throw this.refusals.problem(res, 400, ProblemCode.KeyInvalid, { detail: err.message });
    }
    if (key === undefined) {
      if (!route.required) return next.handle();
      throw this.refusals.problem(res, 400, ProblemCode.KeyMissing);
    }
    const method = scopeMethod(context, req);
    const endpoint = route.endpoint ?? routeEndpoint(req, method);
    const userId = this.refusals.refusing(res, () => this.requests.userId(req, endpoint));
    const selected = this.options.fingerprint(req);
    if (selected === undefined && hasBody(req)) {
      // A body nothing parsed cannot be compared: reusing the key with another body would replay.
      throw this.refusals.problem(res, 415, ProblemCode.BodyUnreadable);
    }
    const hash = this.refusals.refusing(res, () =>
      this.requests.fingerprint(req, endpoint, selected, method),
    );
    const scope = { key, endpoint, userId };
    if (typeof hash === 'string') {
      // A hot replay: answered here, without a promise or a claim.
      const cached = this.coordinator.cachedReplay(scope, hash);
      if (cached) return this.replay(route, res, cached);
    } else {
      // Awaited once the call is subscribed; not an unhandled rejection before that.
      hash.catch(() => undefined);
    }
    const onlyReplay = replayOnly(req, method);
    return afterDecision(() => this.claimAndRoute(route, req, res, scope, hash, next, onlyReplay));
  }

  private async claimAndRoute(
    route: IdempotentRoute,
    req: IdempotencyRequest,
    res: PlatformResponse,
    scope: IdempotencyScope,
    hash: string | Promise<string>,
    next: CallHandler,
    onlyReplay: boolean,
  ): Promise<RoutedCall> {
    const requestHash = typeof hash === 'string' ? hash : await hash;
    const attempt = { scope, requestHash, route, replayOnly: onlyReplay };
    const decision = await this.coordinator.decide(attempt);
    switch (decision.type) {
      case 'replay':
        return { result: this.replay(route, res, decision) };
      case 'reject':
        throw this.refusals.reject(res, decision.code);
      case 'execute': {
        const { execution } = decision;
        if (onlyReplay) {
          // A store without `peek` claimed: free the key at once.
          await execution.cancel();
          throw this.refusals.problem(res, 404, ProblemCode.NothingToReplay);
        }
        const raw = rawResponse(res);
        const hold: OutcomeCapture = (handled, hooks) => {
          holdResponse(raw, this.options.replayHeaders, hooks);
          return handled;
        };
        return { result: execution.run(req, next, hold), cancel: () => execution.cancel() };
      }
    }
  }

  private replay(
    route: IdempotentRoute,
    res: PlatformResponse,
    replay: Replay,
  ): Observable<unknown> {
    const stored = replay.response;
    if (stored.body === null) {
      this.coordinator.answered(replay);
      throw this.refusals.problem(res, 409, ProblemCode.NotReplayable, {
        detail: NOT_REPLAYABLE_DETAILS[stored.omitted ?? 'too_large'],
        extensions: { original_status: stored.statusCode },
      });
    }
    // Written here, whole; the platform's own reply of the `undefined` below is silenced.
    const raw = rawResponse(res);
    adoptReplyHeaders(res, raw);
    hijack(res);
    // Counted once the bytes left: never for a client that went away before they were written.
    raw.once('finish', () => this.coordinator.answered(replay));
    writeStoredResponse(raw, stored, REPLAYED_HEADER);
    if (!route.ownsResponse) silencePlatformReply(res);
    return of(undefined);
  }
}
