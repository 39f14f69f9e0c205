import type { CallHandler, ExecutionContext, Logger } from '@nestjs/common';
import { EMPTY, from, mergeMap, type Observable, of, tap, throwError } from 'rxjs';
import { afterDecision, type RoutedCall } from '../../request/routed-call.js';
import { ActiveCalls } from '../../request/active-calls.js';
import { ProblemCode } from '../../idempotency.constants.js';
import { contextCarrier } from '../../request/context-carrier.js';
import { rejectStatus } from '../../request/reject-status.js';
import type { ResolvedIdempotencyOptions } from '../../idempotency.defaults.js';
import type { ProblemOptions } from '../../idempotency.problems.js';
import type {
  IdempotencyCoordinator,
  RejectCode,
} from '../../execution/idempotency.coordinator.js';
import { fingerprintRequest, UnhashableValueError } from '../../execution/request-fingerprint.js';
import { InvalidIdempotencyKeyError } from '../../request/idempotency-key.parser.js';
import type { IdempotentRoute } from '../../execution/idempotent-route.resolver.js';
import { RequestRefusedError } from '../../request/request-refused.error.js';
import { RequestScope } from '../../request/request-scope.js';
import { scopeEndpoint } from '../../request/scope-endpoint.js';
import { keylessTransaction } from './keyless-transaction.js';
import { reportWithoutHandler, watchHandler } from './rpc-without-handler.js';
import { runsToEnd } from './event-runs-to-end.js';
import { settledInput, UnsettledInputError } from './settled-input.js';
import { captureValue, isNoValue } from './value-capture.js';
import { UnencodableValueError } from './json-value.js';
import type { WireResponse } from '../../execution/handler-outcome.js';
import { valueProblem } from './value-problem.js';
import type { ValueRequest } from './value-request.js';
import type { TransportDeps } from '../transport-adapter.interface.js';
import { handlerName } from './handler-name.js';

/** How refusals are said: a GraphQL error, or an `RpcException`. */
export type ValueType = 'graphql' | 'rpc';

/**
 * What the GraphQL, RPC and NATS adapters share: the outcome is the returned value, the key and
 * the request come from the adapter's `ValueRequest`.
 */
export class ValueIdempotency {
  /** The calls being handled: one that comes again while it runs is refused as in progress. */
  private readonly active = new ActiveCalls();
  private readonly requests: RequestScope;

  private readonly options: ResolvedIdempotencyOptions;
  private readonly coordinator: IdempotencyCoordinator;
  private readonly logger: Logger;

  constructor(deps: TransportDeps) {
    this.options = deps.options;
    this.coordinator = deps.coordinator;
    this.logger = deps.logger;
    this.requests = new RequestScope(this.options.getUserId, this.logger);
  }

  intercept(
    context: ExecutionContext,
    route: IdempotentRoute,
    next: CallHandler,
    type: ValueType,
    read: () => ValueRequest,
  ): Observable<unknown> {
    if (type !== 'rpc') return this.call(context, route, next, type, read);
    const hook = this.options.onRpcWithoutHandler;
    const watched = watchHandler(next);
    let call = this.call(context, route, watched.next, type, read);
    if (hook) call = reportWithoutHandler(call, context, hook, watched.ran, this.logger);
    return runsToEnd(call, handlerName(context), watched.ran, this.logger);
  }

  private call(
    context: ExecutionContext,
    route: IdempotentRoute,
    next: CallHandler,
    type: ValueType,
    read: () => ValueRequest,
  ): Observable<unknown> {
    const args = context.getArgs();
    // Attached once per handler: the same call again while it runs is a duplicate in progress.
    if (this.active.isActive(args))
      return from(this.reject(type, ProblemCode.InProgress)).pipe(
        mergeMap((err) => throwError(() => err)),
      );
    const request = read();
    const carrier = contextCarrier(context);
    return afterDecision(() => this.route(type, request, route, carrier, next), this.active, args);
  }

  private async route(
    type: ValueType,
    request: ValueRequest,
    route: IdempotentRoute,
    carrier: object,
    next: CallHandler,
  ): Promise<RoutedCall> {
    const fail = (status: number, code: ProblemCode, options?: ProblemOptions) =>
      valueProblem(type, status, code, options);
    let key: string | undefined;
    try {
      key = request.key();
    } catch (err) {
      if (!(err instanceof InvalidIdempotencyKeyError)) throw err;
      throw await fail(400, ProblemCode.KeyInvalid, { detail: err.message });
    }
    const endpoint = route.endpoint ?? scopeEndpoint(request.endpoint);
    if (key === undefined) {
      if (route.required) throw await fail(400, ProblemCode.KeyMissing);
      if (!route.transactional) return { result: next.handle() };
      const open = () => this.coordinator.plainTransaction();
      return { result: keylessTransaction(carrier, endpoint, open, next) };
    }
    let userId: string;
    try {
      userId = request.req
        ? this.requests.userId(request.req, endpoint)
        : (request.userId?.() ?? '');
    } catch (err) {
      if (!(err instanceof RequestRefusedError)) throw err;
      throw await fail(err.status, err.code, { detail: err.message });
    }
    // A name shared by several handlers (`endpoint` option) shares keys, never stored values:
    // the pattern or field tells them apart, as the route pattern does over HTTP.
    const hashed = route.endpoint === undefined ? endpoint : `${endpoint}\n${request.endpoint}`;
    let requestHash: string;
    try {
      const input = settledInput(request.input());
      const settled = input instanceof Promise ? await input : input;
      requestHash = fingerprintRequest(type.toUpperCase(), hashed, settled);
    } catch (err) {
      if (!(err instanceof UnhashableValueError) && !(err instanceof UnsettledInputError))
        throw err;
      throw await fail(500, ProblemCode.Misconfigured, {
        detail: `The call's arguments cannot be hashed: ${err.message}`,
      });
    }
    const scope = { key, endpoint, userId };
    const decision = await this.coordinator.decide({ scope, requestHash, route });
    switch (decision.type) {
      case 'replay': {
        const { response } = decision;
        if (response.body === null) {
          this.coordinator.answered(decision);
          throw await fail(409, ProblemCode.NotReplayable, {
            extensions: { original_status: response.statusCode },
          });
        }
        if (isNoValue(response)) {
          // What the handler's stream emitted: nothing (EMPTY), or one undefined (Promise<void>).
          const answered = () => this.coordinator.answered(decision);
          const nothing = response.statusCode === 204 ? of(undefined) : EMPTY;
          return { result: nothing.pipe(tap({ complete: answered })) };
        }
        const value = request.decode(response.body);
        // Counted once handed back, and for GraphQL only a value its schema accepts.
        const answered = async () => {
          if (!request.accepts || (await request.accepts(value))) {
            this.coordinator.answered(decision);
          }
        };
        return { result: of(value).pipe(tap({ complete: () => void answered() })) };
      }
      case 'reject':
        throw await this.reject(type, decision.code);
      case 'execute': {
        const { execution } = decision;
        const unrecorded = () => this.reject(type, ProblemCode.StoreUnavailable);
        return {
          result: execution.run(
            carrier,
            next,
            captureValue(this.encoder(request), unrecorded, type === 'rpc'),
            { streams: type === 'rpc' },
          ),
          cancel: () => execution.cancel(),
        };
      }
    }
  }

  /** The request's encoding, saying why a value cannot be stored (the execution logs only that). */
  private encoder(request: ValueRequest): (value: unknown) => WireResponse {
    return (value) => {
      try {
        return request.encode(value);
      } catch (err) {
        const why = err instanceof UnencodableValueError ? err.message : `reading it threw ${err}`;
        this.logger.warn(`${request.endpoint}: the returned value cannot be stored: ${why}`);
        throw err;
      }
    };
  }

  private reject(type: ValueType, code: RejectCode): Promise<Error> {
    const { status, retry } = rejectStatus(code, this.options.mismatchStatus);
    const options = { extensions: { retry_after: this.options.retryAfterSeconds } };
    return valueProblem(type, status, code, retry ? options : {});
  }
}
