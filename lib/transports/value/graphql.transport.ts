import type { TransportAdapterFactory } from '../transport-adapter.interface.js';
import { isMutationField, type GqlInfo } from './graphql-schema.js';
import { ValueIdempotency } from './value-idempotency.js';
import { graphqlRequest } from './value-request.js';

/** GraphQL mutations: the key in the operation's HTTP header, the outcome the returned value. */
export const graphqlTransport: TransportAdapterFactory = (deps) => {
  const values = new ValueIdempotency(deps);
  return {
    matches: (context) => context.getType<string>() === 'graphql',
    intercept: (context, route, next) =>
      // Field resolvers and queries are reads: only a mutation's outcome is deduplicated.
      isMutationField(context.getArgByIndex(3) as GqlInfo)
        ? values.intercept(context, route, next, 'graphql', () =>
            graphqlRequest(context, deps.options),
          )
        : next.handle(),
  };
};
