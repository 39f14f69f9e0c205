import type { ExecutionContext } from '@nestjs/common';
import type { ResolvedIdempotencyOptions } from '../../idempotency.defaults.js';
import { MICROSERVICE_PATTERN_METADATA } from '../../idempotency-internal.constants.js';
import {
  InvalidIdempotencyKeyError,
  parseIdempotencyKey,
} from '../../request/idempotency-key.parser.js';
import { normalizeUserId } from '../../request/request-scope.js';
import { canonicalJson } from '../../execution/request-fingerprint.js';
import { isEventHandler } from '../../execution/idempotent-route.resolver.js';
import { decodeValue, encodeValue } from './value-capture.js';
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
 * The pattern a message was routed by, as its transport's context tells it; else the patterns its
 * handler declares (gRPC has no such context). Never the class and method names alone: two
 * operations named alike (two `ChargeHandler.charge`) would share a scope, one answered with the
 * other's stored result.
 */
export function routedPattern(context: ExecutionContext, rpcContext: RoutedContext | undefined) {
  const routed =
    rpcContext?.getPattern?.() ??
    rpcContext?.getChannel?.() ??
    rpcContext?.getTopic?.() ??
    rpcContext?.getSubject?.();
  if (routed !== undefined && routed !== null) return normalizePattern(routed);
  const declared: unknown = Reflect.getMetadata(
    MICROSERVICE_PATTERN_METADATA,
    context.getHandler(),
  );
  const patterns = (Array.isArray(declared) ? declared : [declared]).filter((p) => p != null);
  if (patterns.length > 0) return patterns.map(normalizePattern).sort().join(' | ');
  return `${context.getClass().name}.${context.getHandler().name}`;
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
      ? `RPC ${pattern} ${context.getClass().name}.${context.getHandler().name}`
      : `RPC ${pattern}`,
    userId: () => normalizeUserId(options.getRpcUserId(data, rpcContext), false),
    input: () => data,
    encode: (value) => encodeValue(value, maxBytes),
    decode: (body) => decodeValue(body),
  };
}

/**
 * The pattern as the microservice server routes it: a JSON object pattern, however its keys are
 * ordered or spaced, is one pattern (keys sorted, as Nest's `transformPatternToRoute` does).
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
  return parsed !== null && typeof parsed === 'object'
    ? canonicalJson(parsed)
    : typeof pattern === 'string'
      ? pattern
      : String(pattern);
}
