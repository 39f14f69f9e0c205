import type { ExecutionContext } from '@nestjs/common';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import { InvalidIdempotencyKeyError, parseIdempotencyKey } from '../http/idempotency-key.parser.js';
import { rawHeaders } from '../http/http-adapter.utils.js';
import type { IdempotencyRequest } from '../interfaces/idempotency-module-options.interface.js';
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
  /** What is fingerprinted: the resolver's args, or the message payload. */
  input: unknown;
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
    FieldInfo & Partial<ReturnFieldInfo>,
  ];
  const req: IdempotencyRequest = gqlContext?.req ?? gqlContext?.request;
  const field = `${info?.parentType?.name ?? 'Mutation'}.${info?.fieldName ?? context.getHandler().name}`;
  return {
    key: () => (req ? parseIdempotencyKey(rawHeaders(req), options.headerName) : undefined),
    endpoint: field,
    req,
    input: args,
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
    endpoint: `RPC ${typeof pattern === 'string' ? pattern : JSON.stringify(pattern)}`,
    input: data,
  };
}
