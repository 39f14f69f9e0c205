/**
 * A replay runs a mutation's field resolvers again on a parent made of the stored fields: they
 * must read what they read the first time. The parent held the sent form (an enum's name, a
 * DateTime's string), so a resolver that read the internal value (`'paid'`, a `Date`) answered
 * "NOT settled" or failed with `data: null` on the retry of a payment that succeeded, and the
 * client might pay again under a new key. Found by helper-62; a string handed back as the
 * scalar's parsed BigInt, a null dropped and an enum list left out, by helper-63.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication } from '@nestjs/common';
import { Args, Mutation, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { GraphQLScalarType, Kind } from 'graphql';
import { randomUUID } from 'node:crypto';
import { Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { GRAPHQL_APP_START_MS, postGraphql, startGraphqlApp } from '../fixtures/graphql-app.js';

const typeDefs = `
  scalar DateTime
  scalar BigInt
  enum Status { PAID PENDING }
  enum Tag { VIP NEW }
  type Payment {
    id: ID!, amount: Int!, status: Status!, createdAt: DateTime!, state: String!, day: String!
    ledgerId: BigInt!, ledgerRef: String!, refundedAt: String, refunded: Boolean!, tags: [Tag!]!, vip: Boolean!
  }
  type Query { ping: String! }
  type Mutation { createPayment(amount: Int!): Payment! }
`;
const DateTime = new GraphQLScalarType({
  name: 'DateTime',
  serialize: (value) => (value as Date).toISOString(),
  parseValue: (value) => new Date(value as string),
  parseLiteral: (ast) => (ast.kind === Kind.STRING ? new Date(ast.value) : null),
});
/** Out as a decimal string, in as a JS BigInt; the mutation returns what pg returns: a string. */
const BigIntScalar = new GraphQLScalarType({
  name: 'BigInt',
  serialize: (value) => String(value),
  parseValue: (value) => BigInt(value as string),
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
    const ledgerId = `90071992547409${10 + charges}`;
    return { id: `pay_${charges}`, amount, status: 'paid', createdAt, ledgerId, refundedAt: null, tags: ['vip'] }; // prettier-ignore
  }

  /** Reads the enum's internal value, as resolvers do. */
  @ResolveField('state') state(@Parent() payment: { status: string }) {
    return payment.status === 'paid' ? 'settled' : 'NOT settled';
  }

  /** Reads the Date, as resolvers do. */
  @ResolveField('day') day(@Parent() payment: { createdAt: Date }) {
    return payment.createdAt.toISOString().slice(0, 10);
  }

  /** Reads the string the mutation returned, not what the scalar parses (found by helper-63). */
  @ResolveField('ledgerRef') ledgerRef(@Parent() payment: { ledgerId: string }) {
    return `L-${payment.ledgerId.slice(-4)}`;
  }

  @ResolveField('refunded') refunded(@Parent() payment: { refundedAt: string | null }) {
    return payment.refundedAt !== null;
  }

  @ResolveField('vip') vip(@Parent() payment: { tags: string[] }) {
    return payment.tags.includes('vip');
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
      graphql: {
        resolvers: {
          DateTime,
          BigInt: BigIntScalar,
          Status: { PAID: 'paid', PENDING: 'pending' },
          Tag: { VIP: 'vip', NEW: 'new' },
        },
      },
    }));
  }, GRAPHQL_APP_START_MS);
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each([
    ['an enum whose internal value is not its name, unselected', '{ id state }'],
    ['a custom DateTime scalar, unselected', '{ id day }'],
    ['both, selected beside the resolvers that read them', '{ id createdAt day status state }'],
    ['a BigInt the mutation returned as a string', '{ id ledgerRef }'],
    ['a BigInt returned as a string, selected too', '{ id ledgerId ledgerRef }'],
    ['a null field', '{ id refunded }'],
    ['a list of enums', '{ id vip }'],
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
