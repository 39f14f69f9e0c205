import type { ExecutionContext } from '@nestjs/common';
import { parseIdempotencyKey } from '../../request/idempotency-key.parser.js';
import type { TransportAdapterFactory } from '../transport-adapter.interface.js';
import { ValueIdempotency } from './value-idempotency.js';
import { rpcRequest } from './rpc-request.js';

/** The parts of Nest's `NatsContext` and the `nats` headers read here (both optional peers). */
interface NatsContextLike {
  getSubject(): string;
  getHeaders(): { keys(): string[]; values(name: string): string[] } | undefined;
}

function natsContext(context: ExecutionContext): NatsContextLike | undefined {
  if (context.getType<string>() !== 'rpc') return undefined;
  const rpc = context.switchToRpc().getContext<Partial<NatsContextLike> | undefined>();
  return typeof rpc?.getSubject === 'function' && typeof rpc.getHeaders === 'function'
    ? (rpc as NatsContextLike)
    : undefined;
}

/** The headers as a raw list, so a key header sent twice is refused as over HTTP. */
function rawNatsHeaders(nats: NatsContextLike): string[] {
  const headers = nats.getHeaders();
  return (headers?.keys() ?? []).flatMap((name) =>
    headers!.values(name).flatMap((value) => [name, value]),
  );
}

/**
 * NATS message handlers: as RPC, but the key comes from the message header `headerName` (unless
 * `getRpcKey` returns one); the scope is `RPC <subject>`, as `rpcRequest` reads it.
 */
export const natsTransport: TransportAdapterFactory = (deps) => {
  const values = new ValueIdempotency(deps);
  return {
    matches: (context) => natsContext(context) !== undefined,
    intercept: (context, route, next) =>
      values.intercept(context, route, next, 'rpc', () => {
        const nats = natsContext(context)!;
        const rpc = rpcRequest(context, deps.options);
        return {
          ...rpc,
          key: () =>
            rpc.key() ?? parseIdempotencyKey(rawNatsHeaders(nats), deps.options.headerName),
        };
      }),
  };
};
