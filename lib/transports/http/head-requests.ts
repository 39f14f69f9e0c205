import { RequestMethod, type ExecutionContext } from '@nestjs/common';
import { METHOD_METADATA } from '@nestjs/common/constants.js';
import type { IdempotencyRequest } from '../../interfaces/idempotency-module-options.interface.js';

/**
 * The method a request is scoped and fingerprinted as. Express and Fastify send HEAD to a GET
 * route's handler: such a HEAD is GET's request (GET's record, GET's fingerprint) and only ever
 * replays it, without the body; it never runs the handler for itself (see `replayOnly`).
 */
export function scopeMethod(context: ExecutionContext, req: IdempotencyRequest): string {
  if (req.method !== 'HEAD') return req.method;
  const declared: unknown = Reflect.getMetadata(METHOD_METADATA, context.getHandler());
  return declared === RequestMethod.GET ? 'GET' : req.method;
}

/** A HEAD answered from GET's record: when there is nothing to replay, nothing runs. */
export const replayOnly = (req: IdempotencyRequest, method: string): boolean =>
  req.method !== method;
