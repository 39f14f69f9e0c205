import type { TransportAdapterFactory } from '../transport-adapter.interface.js';
import { ValueIdempotency } from './value-idempotency.js';
import { rpcRequest } from './rpc-request.js';

/**
 * Microservice handlers of any transport (TCP and those without an adapter of their own): the
 * key from `getRpcKey`, the scope `RPC <pattern>`, the outcome the returned value.
 */
export const rpcTransport: TransportAdapterFactory = (deps) => {
  const values = new ValueIdempotency(deps);
  return {
    matches: (context) => context.getType<string>() === 'rpc',
    intercept: (context, route, next) =>
      values.intercept(context, route, next, 'rpc', () => rpcRequest(context, deps.options)),
  };
};
