import type { CallHandler, ExecutionContext } from '@nestjs/common';
import { type Observable, of } from 'rxjs';
import { ProblemCode, REPLAYED_HEADER } from '../../idempotency.constants.js';
import { NOT_REPLAYABLE_DETAILS } from '../../idempotency.problems.js';
import {
  InvalidIdempotencyKeyError,
  parseIdempotencyKey,
} from '../../request/idempotency-key.parser.js';
import type { Replay } from '../../execution/idempotency.coordinator.js';
import { afterDecision, type RoutedCall } from '../../request/routed-call.js';
import { ActiveCalls, type CallMark } from '../../request/active-calls.js';
import type { IdempotentExecution } from '../../execution/idempotent.execution.js';
import { scopeEndpoint } from '../../request/scope-endpoint.js';
import type { IdempotentRoute } from '../../execution/idempotent-route.resolver.js';
import {
  hasBody,
  type PlatformResponse,
  keyHeader,
  clientGone,
  rawResponse,
  routeEndpoint,
} from '../../request/http-adapter.utils.js';
import type { IdempotencyRequest } from '../../interfaces/idempotency-module-options.interface.js';
import type { IdempotencyScope } from '../../interfaces/idempotency-store.interface.js';
import { RequestScope } from '../../request/request-scope.js';
import type {
  TransportAdapter,
  TransportAdapterFactory,
  TransportDeps,
} from '../transport-adapter.interface.js';
import { HttpRefusals } from './http-refusals.js';
import { holdCapture } from './response-capture.js';
import { replayOnly, scopeMethod } from './head-requests.js';
import { replayStoredResponse } from './response-replay.js';

/** A request's run and the hold on its response, kept on its mark (`ActiveCalls`). */
interface HttpRun {
  execution: IdempotentExecution;
  drop: () => void;
}
/** Requests the interceptor handles (beside them rather than a new key on `req`). */
const calls = new ActiveCalls<HttpRun>();

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  typeof (value as PromiseLike<unknown> | null)?.then === 'function';

/**
 * HTTP (Express, Fastify): reads the key header and the request, then writes the replay, the
 * problem response, or holds the handler's response at the socket while it is stored.
 */
class HttpTransport implements TransportAdapter {
  private readonly requests: RequestScope;
  private readonly refusals: HttpRefusals;

  constructor(private readonly deps: TransportDeps) {
    this.requests = new RequestScope(deps.options.getUserId, deps.logger);
    this.refusals = new HttpRefusals(deps.options);
  }

  matches(context: ExecutionContext): boolean {
    return context.getType<string>() === 'http';
  }

  intercept(context: ExecutionContext, route: IdempotentRoute, next: CallHandler) {
    const { options, coordinator } = this.deps;
    const http = context.switchToHttp();
    const req = http.getRequest();
    const res = http.getResponse();
    // Attached once per handler (IdempotencyInterceptorOrder): an app interceptor calling the
    // route again while this call runs (a hedge, a re-call) is a duplicate of a call in progress.
    if (calls.isActive(req)) {
      calls.activeRun(req)?.execution.overlapped();
      throw this.refusals.reject(res, ProblemCode.InProgress);
    }

    let key: string | undefined;
    try {
      key = parseIdempotencyKey(keyHeader(req, options.headerName), options.headerName);
    } catch (err) {
      if (!(err instanceof InvalidIdempotencyKeyError)) throw err;
      throw this.refusals.problem(res, 400, ProblemCode.KeyInvalid, { detail: err.message });
    }
    if (key === undefined) {
      // Passed through by each attachment alike: nothing to remember for a request without a key.
      if (!route.required) return next.handle();
      throw this.refusals.problem(res, 400, ProblemCode.KeyMissing);
    }
    const method = scopeMethod(context, req);
    const endpoint = route.endpoint ?? scopeEndpoint(routeEndpoint(req, method));
    const userId = this.refusals.refusing(res, () => this.requests.userId(req, endpoint));
    const selected = options.fingerprint(req);
    // An async `fingerprint` (files read from a multipart parser) is awaited, not hashed as `{}`.
    const hash = isThenable(selected)
      ? Promise.resolve(selected).then((s) => this.hashOf(req, res, endpoint, s, method, route))
      : this.hashOf(req, res, endpoint, selected, method, route);
    const scope = { key, endpoint, userId };
    if (typeof hash === 'string') {
      // A hot replay: answered here, without a promise or a claim.
      const cached = coordinator.cachedReplay(scope, hash);
      if (cached) return this.replay(route, res, cached);
    } else {
      // Awaited once the call is subscribed; not an unhandled rejection before that.
      hash.catch(() => undefined);
    }
    const onlyReplay = replayOnly(req, method);
    return afterDecision(
      (mark) => this.claimAndRoute(route, req, res, scope, hash, next, onlyReplay, mark),
      calls,
      req,
    );
  }

  private hashOf(
    req: IdempotencyRequest,
    res: PlatformResponse,
    endpoint: string,
    selected: unknown,
    method: string,
    route: IdempotentRoute,
    /** Over HTTP/2, whether bytes came after the headers, once known. */
    bodyCame?: boolean,
  ): string | Promise<string> {
    const body = selected !== undefined ? false : (bodyCame ?? hasBody(req));
    if (body === false)
      return this.refusals.refusing(res, () =>
        this.requests.fingerprint(req, endpoint, selected, method, route),
      );
    // A body nothing parsed cannot be compared: reusing the key with another body would replay.
    if (body === true) throw this.refusals.problem(res, 415, ProblemCode.BodyUnreadable);
    return body.then((has) => this.hashOf(req, res, endpoint, selected, method, route, has));
  }

  private async claimAndRoute(
    route: IdempotentRoute,
    req: IdempotencyRequest,
    res: PlatformResponse,
    scope: IdempotencyScope,
    hash: string | Promise<string>,
    next: CallHandler,
    onlyReplay: boolean,
    mark: CallMark<HttpRun>,
  ): Promise<RoutedCall> {
    const requestHash = typeof hash === 'string' ? hash : await hash;
    const earlier = mark.earlier;
    // The call came back after its run's answer ended (an app's retry()): conclude that run.
    if (earlier && (await earlier.execution.retried())) earlier.drop();
    const attempt = { scope, requestHash, route, replayOnly: onlyReplay };
    const decision = await this.deps.coordinator.decide(attempt);
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
        const hold = holdCapture(raw, this.deps.options.replayHeaders);
        const run = { execution, drop: hold.drop };
        mark.run = run;
        // Dropped once concluded (nothing asks a concluded run anything): V8's young collections
        // keep whatever a WeakMap value reaches, so a run kept on the mark took the request's
        // objects through each, and V8 then allocated them in the old generation.
        const ended = () => {
          if (mark.run === run) mark.run = undefined;
        };
        return {
          result: execution.run(req, next, hold.capture, { gone: () => clientGone(raw), ended }),
          cancel: () => execution.cancel(),
        };
      }
    }
  }

  private replay(
    route: IdempotentRoute,
    res: PlatformResponse,
    replay: Replay,
  ): Observable<unknown> {
    const { coordinator } = this.deps;
    const stored = replay.response;
    if (stored.body === null) {
      coordinator.answered(replay);
      throw this.refusals.problem(res, 409, ProblemCode.NotReplayable, {
        detail: NOT_REPLAYABLE_DETAILS[stored.omitted ?? 'too_large'],
        extensions: { original_status: stored.statusCode },
      });
    }
    replayStoredResponse(res, stored, {
      replayedHeader: REPLAYED_HEADER,
      ownsResponse: route.ownsResponse,
      sent: () => coordinator.answered(replay),
    });
    return of(undefined);
  }
}

export const httpTransport: TransportAdapterFactory = (deps) => new HttpTransport(deps);
