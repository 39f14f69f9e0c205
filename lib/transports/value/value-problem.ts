import type { ProblemCode } from '../../idempotency.constants.js';
import {
  type IdempotencyProblem,
  IdempotencyProblemException,
  type ProblemOptions,
} from '../../idempotency.problems.js';

/**
 * A refusal on a GraphQL resolver. GraphQL copies an error's `extensions` into the response's
 * `errors[].extensions`, so clients branch on `extensions.code` as on the problem `code` in HTTP.
 * Not an `HttpException`: Apollo's driver would rewrite `code` to its own names.
 */
export class IdempotencyGraphQLError extends Error {
  readonly extensions: { code: ProblemCode; status: number; problem: IdempotencyProblem };

  constructor(readonly problem: IdempotencyProblem) {
    super(problem.detail);
    this.name = 'IdempotencyGraphQLError';
    this.extensions = { code: problem.code, status: problem.status, problem };
  }
}

/** The refusal in the terms of the transport: a GraphQL error, or an `RpcException`. */
export async function valueProblem(
  type: 'graphql' | 'rpc',
  status: number,
  code: ProblemCode,
  options: ProblemOptions = {},
): Promise<Error> {
  const problem = new IdempotencyProblemException(status, code, options).getResponse();
  if (type === 'graphql') return new IdempotencyGraphQLError(problem as IdempotencyProblem);
  // Only loaded in an RPC context, where the app has @nestjs/microservices installed.
  const { RpcException } = await import('@nestjs/microservices');
  return new RpcException(problem as object);
}
