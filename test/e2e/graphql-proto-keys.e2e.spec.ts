/**
 * An alias is any GraphQL name, `__proto__` included (graphql-js builds its results on
 * `Object.create(null)`, so the first answer carries it), and a JSON scalar's value may have an
 * own `__proto__` key (metadata parsed from a client's JSON). Until 2026-12-05 the stored object
 * was built with `{}`, where assigning `__proto__` sets the prototype: the field or key was not
 * stored, and the retry of a payment that succeeded answered otherwise (found by helper-69).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication } from '@nestjs/common';
import { Mutation, Query, Resolver } from '@nestjs/graphql';
import { GraphQLJSON } from 'graphql-scalars';
import { randomUUID } from 'node:crypto';
import { Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { GRAPHQL_APP_START_MS, postGraphql, startGraphqlApp } from '../fixtures/graphql-app.js';

const typeDefs = `
  type Charge { id: ID!, amount: Int! }
  scalar JSON
  type Payment { id: ID!, amount: Int!, charge: Charge!, metadata: JSON! }
  type Query { ping: String! }
  type Mutation { pay: Payment! }
`;
let charges = 0;

@Resolver('Payment')
class PaymentsResolver {
  @Query('ping') ping() {
    return 'pong';
  }

  @Mutation('pay')
  @Idempotent()
  pay() {
    charges++;
    // Metadata as a client gave it (Stripe-style), parsed from JSON: `__proto__` is an own key.
    const metadata = JSON.parse('{"order":"42","__proto__":{"note":"gift"}}');
    return { id: `pay_${charges}`, amount: 500, charge: { id: `ch_${charges}`, amount: 500 }, metadata }; // prettier-ignore
  }
}

describe('GraphQL: a __proto__ alias or key', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;
  beforeAll(async () => {
    db = await createMigratedDatabase('gql_proto');
    ({ app, url } = await startGraphqlApp({
      db,
      typeDefs,
      providers: [PaymentsResolver],
      graphql: { resolvers: { JSON: GraphQLJSON } },
    }));
  }, GRAPHQL_APP_START_MS);
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each([
    ['a scalar', '{ __proto__: id amount }'],
    ['an object', '{ id __proto__: charge { id } }'],
    ['a JSON scalar whose value has an own __proto__ key', '{ id metadata }'],
  ])('%s: the retry answers as the first call', async (_c, sel) => {
    const key = randomUUID();
    const before = charges;
    const query = `mutation { pay ${sel} }`;
    const first = await postGraphql(url, query, key);
    expect(first.errors).toBeUndefined();
    const second = await postGraphql(url, query, key);
    expect(charges).toBe(before + 1);
    expect(second).toEqual(first);
  });
});
