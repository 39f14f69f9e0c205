import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum.js';
import {
  HOST_METADATA,
  HTTP_CODE_METADATA,
  METHOD_METADATA,
  RESPONSE_PASSTHROUGH_METADATA,
  ROUTE_ARGS_METADATA,
  VERSION_METADATA,
} from '@nestjs/common/constants.js';
import { type ExecutionContext, RequestMethod } from '@nestjs/common';
import { IDEMPOTENT_METADATA } from '../idempotency-internal.constants.js';
import { IDEMPOTENCY_DEFAULTS, type ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import type { IdempotentOptions } from '../interfaces/idempotent-options.interface.js';
import { handlerProperty } from './handler-property.js';

/** Everything the interceptor needs about one route, merged once and cached. */
export interface IdempotentRoute {
  ttlSeconds: number;
  required: boolean;
  endpoint?: string;
  transactionId?: IdempotentOptions['transactionId'];
  transactional: boolean | 'single';
  storeResponse: 'full' | 'digest';
  /** The handler writes the response itself (`@Res()` without passthrough). */
  ownsResponse: boolean;
  /** What Nest answers when the handler returns (`@HttpCode()`, else 201 for POST, else 200). */
  successStatus: number;
  /** The handler's `@Version()` (or its controller's), as JSON; undefined when it declares none. */
  version?: string;
  /** The controller's `host` patterns, as JSON; undefined when it is bound to none. */
  hosts?: string;
  /** One of them matches many host names (a RegExp, or a pattern with params). */
  hostVaries?: boolean;
}

/**
 * A microservice `@EventPattern()` handler (`@nestjs/microservices`' `PATTERN_HANDLER_METADATA` is
 * `PatternHandler.EVENT`): one event reaches every handler of its pattern, each its own operation.
 */
export const isEventHandler = (handler: object): boolean =>
  Reflect.getMetadata('microservices:handler_type', handler) === 2;

type Handler = (...args: unknown[]) => unknown;

/** Reads `@Idempotent()` metadata once per (controller, handler) pair. */
export class IdempotentRouteResolver {
  private readonly cache = new Map<Handler, Map<object, IdempotentRoute | null>>();

  constructor(private readonly options: ResolvedIdempotencyOptions) {}

  resolve(context: ExecutionContext): IdempotentRoute | null {
    const handler = context.getHandler() as Handler;
    const cls = context.getClass();
    let byClass = this.cache.get(handler);
    if (!byClass) this.cache.set(handler, (byClass = new Map()));
    let route = byClass.get(cls);
    if (route === undefined) {
      route = this.build(cls, handler);
      byClass.set(cls, route);
    }
    return route;
  }

  private build(cls: object, handler: Handler): IdempotentRoute | null {
    const onClass: IdempotentOptions | undefined = Reflect.getMetadata(IDEMPOTENT_METADATA, cls);
    const onMethod: IdempotentOptions | undefined = Reflect.getMetadata(
      IDEMPOTENT_METADATA,
      handler,
    );
    if (!onClass && !onMethod) return null;
    const merged: IdempotentOptions = { ...onClass, ...onMethod };
    const event = isEventHandler(handler);
    return {
      ttlSeconds: merged.ttlSeconds ?? this.options.ttlSeconds,
      // An event without a key has nobody to refuse: a class's `required` would drop it unseen.
      required: (event ? onMethod?.required : merged.required) ?? false,
      endpoint: merged.endpoint,
      transactionId: merged.transactionId,
      transactional: merged.transactional ?? false,
      storeResponse: merged.storeResponse ?? IDEMPOTENCY_DEFAULTS.storeResponse,
      ownsResponse: ownsResponse(cls, handlerProperty(cls, handler)),
      successStatus:
        Reflect.getMetadata(HTTP_CODE_METADATA, handler) ??
        (Reflect.getMetadata(METHOD_METADATA, handler) === RequestMethod.POST ? 201 : 200),
      version: declaredVersion(cls, handler),
      ...declaredHosts(cls),
    };
  }
}

/**
 * Header, media-type and custom versioning route one path to several handlers: the versions the
 * handler declares go into the fingerprint (`VERSION_NEUTRAL` by name), so a key used on one
 * handler is refused on another. A handler declaring several versions is one route.
 */
function declaredVersion(cls: object, handler: Handler): string | undefined {
  const declared: unknown =
    Reflect.getMetadata(VERSION_METADATA, handler) ?? Reflect.getMetadata(VERSION_METADATA, cls);
  if (declared === undefined) return undefined;
  const versions = (Array.isArray(declared) ? declared : [declared]).map((v) =>
    typeof v === 'symbol' ? 'VERSION_NEUTRAL' : String(v),
  );
  return JSON.stringify(versions.sort());
}

/**
 * Two controllers bound to different fixed hosts can serve the same path: their patterns go into
 * the fingerprint, so a key used on one is refused on the other. One controller's several hosts
 * stay one route.
 */
function declaredHosts(cls: object): { hosts?: string; hostVaries?: boolean } {
  const declared: unknown = Reflect.getMetadata(HOST_METADATA, cls);
  if (declared === undefined) return {};
  const list = Array.isArray(declared) ? declared : [declared];
  return {
    hosts: JSON.stringify(list.map(String).sort()),
    hostVaries: list.some((h) => typeof h !== 'string' || h.includes(':')),
  };
}

/** Mirrors Nest's own test: a `@Res()`/`@Next()` parameter without passthrough. */
function ownsResponse(cls: object, method: string): boolean {
  const args: Record<string, unknown> = Reflect.getMetadata(ROUTE_ARGS_METADATA, cls, method) ?? {};
  const handled = Object.keys(args).some((key) => {
    const type = Number(key.split(':')[0]);
    return type === RouteParamtypes.RESPONSE || type === RouteParamtypes.NEXT;
  });
  return handled && !Reflect.getMetadata(RESPONSE_PASSTHROUGH_METADATA, cls, method);
}
