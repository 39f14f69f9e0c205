import type { TransportAdapterFactory } from './transport-adapter.interface.js';
import { httpTransport } from './http/http.transport.js';
import { graphqlTransport } from './value/graphql.transport.js';
import { natsTransport } from './value/nats.transport.js';
import { rpcTransport } from './value/rpc.transport.js';

/**
 * Every transport `@Idempotent()` speaks, most specific first: a call goes to the first that
 * `matches` it (NATS before the generic RPC adapter). A new transport is one file added here.
 */
export const TRANSPORT_ADAPTERS: readonly TransportAdapterFactory[] = [
  httpTransport,
  graphqlTransport,
  natsTransport,
  rpcTransport,
];
