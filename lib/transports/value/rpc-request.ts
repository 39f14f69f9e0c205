import type { ExecutionContext } from '@nestjs/common';
import type { ResolvedIdempotencyOptions } from '../../idempotency.defaults.js';
import { MICROSERVICE_PATTERN_METADATA } from '../../idempotency-internal.constants.js';
import {
  InvalidIdempotencyKeyError,
  parseIdempotencyKey,
} from '../../request/idempotency-key.parser.js';
import { normalizeUserId } from '../../request/request-scope.js';
import { isEventHandler } from '../../execution/idempotent-route.resolver.js';
import { decodeValue, encodeValue } from './value-capture.js';
import { handlerName } from './handler-name.js';
import type { ValueRequest } from './value-request.js';

/** What each of Nest's transport contexts says of the pattern a message was routed by. */
interface RoutedContext {
  /** TCP, RabbitMQ. */
  getPattern?(): unknown;
  /** Redis. */
  getChannel?(): unknown;
  /** MQTT, Kafka. */
  getTopic?(): unknown;
  /** NATS. */
  getSubject?(): unknown;
}

/**
 * The pattern a message was routed by, as its transport's context tells it (and what its handler
 * declared, when a wildcard matched it); else the patterns its handler declares (gRPC has none).
 * Never the class and method names alone: two operations named alike (two `ChargeHandler.charge`)
 * would share a scope, one answered with the other's stored result.
 */
export function routedPattern(context: ExecutionContext, rpcContext: RoutedContext | undefined) {
  const routed =
    rpcContext?.getPattern?.() ??
    rpcContext?.getChannel?.() ??
    rpcContext?.getTopic?.() ??
    rpcContext?.getSubject?.();
  const declared = declaredPatterns(context.getHandler());
  if (routed !== undefined && routed !== null) {
    // A client's pattern is parsed as Nest routes it; a channel, topic or subject is a route.
    const pattern = rpcContext?.getPattern ? normalizePattern(routed) : String(routed);
    // A wildcard subscription (NATS `orders.*`, Redis `wildcards`) adds what it declared: an
    // `orders.*` and an `orders.created` handler both get `orders.created`, and are two handlers.
    if (declared.length === 0 || declared.includes(pattern)) return pattern;
    return `${pattern} (${declared.join(' | ')})`;
  }
  return declared.length > 0 ? declared.join(' | ') : handlerName(context);
}

const declaredByHandler = new WeakMap<object, string[]>();

/**
 * The patterns a handler declares (`@MessagePattern`, `@EventPattern`), as Nest routes them; read
 * once per handler, not on every call.
 */
export function declaredPatterns(handler: object): string[] {
  let patterns = declaredByHandler.get(handler);
  if (!patterns) {
    const declared: unknown = Reflect.getMetadata(MICROSERVICE_PATTERN_METADATA, handler);
    const list = Array.isArray(declared) ? declared : [declared];
    patterns = list
      .filter((p) => p != null)
      .map(normalizePattern)
      .sort();
    declaredByHandler.set(handler, patterns);
  }
  return patterns;
}

export function rpcRequest(
  context: ExecutionContext,
  options: ResolvedIdempotencyOptions,
): ValueRequest {
  const rpc = context.switchToRpc();
  const data = rpc.getData();
  const rpcContext = rpc.getContext<RoutedContext | undefined>();
  const pattern = routedPattern(context, rpcContext);
  const maxBytes = options.maxResponseBytes;
  return {
    key: () => {
      const value = options.getRpcKey(data, rpcContext);
      if (value === undefined || value === null) return undefined;
      if (typeof value !== 'string') {
        throw new InvalidIdempotencyKeyError('The idempotency key must be a string');
      }
      // The same rules as the header: a printable-ASCII key of at most 255 characters.
      return parseIdempotencyKey([options.headerName, value], options.headerName);
    },
    // Each handler of an event is its own operation, with its own scope.
    endpoint: isEventHandler(context.getHandler())
      ? `RPC ${pattern} ${handlerName(context)}`
      : `RPC ${pattern}`,
    userId: () => normalizeUserId(options.getRpcUserId(data, rpcContext), false),
    input: () => data,
    encode: (value) => encodeValue(value, maxBytes),
    decode: (body) => decodeValue(body),
  };
}

/**
 * The pattern as the microservice server routes it, by the rules of Nest's
 * `transformPatternToRoute`: what a client sends is JSON-parsed (`'"charge"'` is `charge`,
 * `'7.0'` is `7`); an object's keys are sorted, however ordered or spaced, an array is an object
 * of its indexes (as Nest's Redis and NATS clients send it), and past five levels or twenty keys
 * Nest reads no further. A RegExp (Kafka) is its source text.
 */
export function normalizePattern(pattern: unknown): string {
  let parsed = pattern;
  if (typeof pattern === 'string') {
    try {
      parsed = JSON.parse(pattern);
    } catch {
      return pattern;
    }
  }
  return String(routeOf(parsed, 0));
}

const escape = (s: string) => s.replace(/\\/g, '\\\\').replace(/"/g, '\\"');

function routeOf(pattern: unknown, depth: number): unknown {
  if (typeof pattern === 'string' || typeof pattern === 'number') return `${pattern}`;
  if (pattern instanceof RegExp) return String(pattern);
  if (pattern === null || typeof pattern !== 'object') return pattern;
  if (depth > 5) return '[MAX_DEPTH_REACHED]';
  const keys = Object.keys(pattern);
  if (keys.length > 20) return '[TOO_MANY_KEYS]';
  const parts = keys
    .sort((a, b) => a.localeCompare(b))
    .map((key) => {
      const value = (pattern as Record<string, unknown>)[key];
      const route = routeOf(value, depth + 1);
      return `"${escape(key)}":${typeof value === 'string' ? `"${escape(String(route))}"` : String(route)}`;
    });
  return `{${parts.join(',')}}`;
}
