import type { ExecutionContext } from '@nestjs/common';
import type { ResolvedIdempotencyOptions } from '../../idempotency.defaults.js';
import {
  InvalidIdempotencyKeyError,
  parseIdempotencyKey,
} from '../../request/idempotency-key.parser.js';
import { keyHeader } from '../../request/http-adapter.utils.js';
import type { IdempotencyRequest } from '../../interfaces/idempotency-module-options.interface.js';
import { normalizeUserId } from '../../request/request-scope.js';
import type { WireResponse } from '../../execution/handler-outcome.js';
import { canonicalJson } from '../../execution/request-fingerprint.js';
import { isEventHandler } from '../../execution/idempotent-route.resolver.js';
import { graphqlFingerprintInput } from './graphql-fingerprint.js';
import { encodeGraphQLOutput } from './graphql-output.js';
import { replayGraphQLOutput } from './graphql-replay.js';
import type { GqlInfo } from './graphql-schema.js';
import { decodeValue, encodeValue, jsonWire } from './value-capture.js';
import { graphqlAccepts, type FieldInfo as ReturnFieldInfo } from './graphql-acceptance.js';

const ok = Promise.resolve(true);

/** What a GraphQL resolver or RPC handler call is, read once from its context. */
export interface ValueRequest {
  /** The parsed key, or undefined when none was sent. Throws `InvalidIdempotencyKeyError`. */
  key(): string | undefined;
  /** Default scope name: `Mutation.createPayment`, or `RPC <pattern>`. */
  endpoint: string;
  /** The HTTP request under a GraphQL operation (for `getUserId`); none for RPC. */
  req?: IdempotencyRequest;
  /** RPC: the user scope from `getRpcUserId` (GraphQL reads `req` with `getUserId`). */
  userId?: () => string;
  /** What is fingerprinted: the resolver's args and selection, or the message payload. */
  input(): unknown;
  /** What is stored of the returned value; throws `UnencodableValueError`. */
  encode(value: unknown): WireResponse;
  /** What a replay returns, from the stored body. */
  decode(body: Buffer): unknown;
  /** GraphQL: whether the schema accepts a replayed value for this field. */
  accepts?(value: unknown): Promise<boolean>;
}

/** Apollo and most drivers put the HTTP request on the context as `req` (Mercurius: `request`). */
interface GraphQLContext {
  req?: IdempotencyRequest;
  request?: IdempotencyRequest;
}

interface FieldInfo {
  parentType?: { name?: string };
  fieldName?: string;
}

export function graphqlRequest(
  context: ExecutionContext,
  options: ResolvedIdempotencyOptions,
): ValueRequest {
  const [, args, gqlContext, info] = context.getArgs() as [
    unknown,
    unknown,
    GraphQLContext,
    FieldInfo & GqlInfo & Partial<ReturnFieldInfo>,
  ];
  const req: IdempotencyRequest = gqlContext?.req ?? gqlContext?.request;
  const field = `${info?.parentType?.name ?? 'Mutation'}.${info?.fieldName ?? context.getHandler().name}`;
  return {
    key: () =>
      req ? parseIdempotencyKey(keyHeader(req, options.headerName), options.headerName) : undefined,
    endpoint: field,
    req,
    input: () => graphqlFingerprintInput(info, args),
    encode: (value) =>
      jsonWire(JSON.stringify(encodeGraphQLOutput(value, info, options.maxResponseBytes))),
    decode: (body) => replayGraphQLOutput(JSON.parse(body.toString('utf8')), info),
    accepts: (value) =>
      info?.returnType ? graphqlAccepts(value, info as ReturnFieldInfo, gqlContext) : ok,
  };
}

export function rpcRequest(
  context: ExecutionContext,
  options: ResolvedIdempotencyOptions,
): ValueRequest {
  const rpc = context.switchToRpc();
  const data = rpc.getData();
  const rpcContext = rpc.getContext<{ getPattern?: () => unknown } | undefined>();
  const pattern =
    rpcContext?.getPattern?.() ?? `${context.getClass().name}.${context.getHandler().name}`;
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
      ? `RPC ${normalizePattern(pattern)} ${context.getClass().name}.${context.getHandler().name}`
      : `RPC ${normalizePattern(pattern)}`,
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
