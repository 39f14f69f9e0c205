import type { ExecutionContext } from '@nestjs/common';
import type { ResolvedIdempotencyOptions } from '../../idempotency.defaults.js';

import { parseIdempotencyKey } from '../../request/idempotency-key.parser.js';
import { keyHeader } from '../../request/http-adapter.utils.js';
import type { IdempotencyRequest } from '../../interfaces/idempotency-module-options.interface.js';
import type { WireResponse } from '../../execution/handler-outcome.js';
import { graphqlFingerprintInput } from './graphql-fingerprint.js';
import { encodeGraphQLOutput } from './graphql-output.js';
import { replayGraphQLOutput } from './graphql-replay.js';
import type { GqlInfo } from './graphql-schema.js';
import { jsonWire } from './value-capture.js';
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
