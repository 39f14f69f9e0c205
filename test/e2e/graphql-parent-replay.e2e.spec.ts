/**
 * A replay runs a mutation's field resolvers again on a parent made of the stored fields: they
 * must read what they read the first time. The parent held the sent form (an enum's name, a
 * DateTime's string), so a resolver that read the internal value (`'paid'`, a `Date`) answered
 * "NOT settled" or failed with `data: null` on the retry of a payment that succeeded, and the
 * client might pay again under a new key. Found by helper-62.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication } from '@nestjs/common';
import { Args, Mutation, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { GraphQLScalarType, Kind } from 'graphql';
import { randomUUID } from 'node:crypto';
import { Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { postGraphql, startGraphqlApp } from '../fixtures/graphql-app.js';

const typeDefs = `
  scalar DateTime
  enum Status { PAID PENDING }
  type Payment { id: ID!, amount: Int!, status: Status!, createdAt: DateTime!, state: String!, day: String! }
  type Query { ping: String! }
  type Mutation { createPayment(amount: Int!): Payment! }
`;
const DateTime = new GraphQLScalarType({
  name: 'DateTime',
  serialize: (value) => (value as Date).toISOString(),
  parseValue: (value) => new Date(value as string),
  parseLiteral: (ast) => (ast.kind === Kind.STRING ? new Date(ast.value) : null),
});
let charges = 0;

@Resolver('Payment')
class PaymentsResolver {
  @Query('ping') ping() {
    return 'pong';
  }

  @Mutation('createPayment')
  @Idempotent()
  createPayment(@Args('amount') amount: number) {
    charges++;
    const createdAt = new Date('2026-12-05T10:00:00Z');
    return { id: `pay_${charges}`, amount, status: 'paid', createdAt };
  }

  /** Reads the enum's internal value, as resolvers do. */
  @ResolveField('state') state(@Parent() payment: { status: string }) {
    return payment.status === 'paid' ? 'settled' : 'NOT settled';
  }

  /** Reads the Date, as resolvers do. */
  @ResolveField('day') day(@Parent() payment: { createdAt: Date }) {
    return payment.createdAt.toISOString().slice(0, 10);
  }
}

describe('a replay hands field resolvers their parent as the mutation returned it', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;
  beforeAll(async () => {
    db = await createMigratedDatabase('graphql_parent_replay');
    ({ app, url } = await startGraphqlApp({
      db,
      typeDefs,
      providers: [PaymentsResolver],
      graphql: { resolvers: { DateTime, Status: { PAID: 'paid', PENDING: 'pending' } } },
    }));
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each([
    ['an enum whose internal value is not its name, unselected', '{ id state }'],
    ['a custom DateTime scalar, unselected', '{ id day }'],
    ['both, selected beside the resolvers that read them', '{ id createdAt day status state }'],
  ])('%s: the retry answers what the first call answered, one charge', async (_case, selection) => {
    const key = randomUUID();
    const before = charges;
    const query = `mutation { createPayment(amount: 500) ${selection} }`;
    const first = await postGraphql(url, query, key);
    expect(first.errors).toBeUndefined();
    expect(await postGraphql(url, query, key)).toEqual(first);
    expect(charges).toBe(before + 1);
  });
});
