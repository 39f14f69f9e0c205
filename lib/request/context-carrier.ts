import type { ExecutionContext } from '@nestjs/common';

/**
 * What a call's context hangs on: the HTTP request; for GraphQL the field's `info` (the request
 * is shared by every field of an operation); for RPC the per-message transport context.
 */
export function contextCarrier(ctx: ExecutionContext): object {
  const type = ctx.getType<string>();
  if (type === 'http') return ctx.switchToHttp().getRequest();
  const carrier: unknown = ctx.getArgByIndex(type === 'graphql' ? 3 : 1);
  return typeof carrier === 'object' && carrier !== null ? carrier : ctx.getArgs();
}
