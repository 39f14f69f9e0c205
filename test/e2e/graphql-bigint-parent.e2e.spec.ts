/**
 * graphql-scalars' BigInt (Prisma returns BIGINT columns as JS bigints): a payment's
 * `amountMinor` returned as `125050n`, sent as the JSON number 125050, which its `parseValue`
 * gives back as a number. A field resolver doing bigint arithmetic on its parent must read a
 * bigint on the replay too. Until 2026-12-05 the record noted only that the field was parsed
 * (`#parsed`), and the retry threw "Cannot mix BigInt and other types": `data: null` for a
 * payment that succeeded (found by helper-69). Now such fields are noted as `#bigint`.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication } from '@nestjs/common';
import { Mutation, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { GraphQLBigInt } from 'graphql-scalars';
import { randomUUID } from 'node:crypto';
import { Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { GRAPHQL_APP_START_MS, postGraphql, startGraphqlApp } from '../fixtures/graphql-app.js';

const typeDefs = `
  scalar BigInt
  type Payment { id: ID!, amountMinor: BigInt!, major: String!, fee: String! }
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
    return { id: `pay_${charges}`, amountMinor: 125050n };
  }

  /** Whole currency units, bigint division. */
  @ResolveField('major') major(@Parent() p: { amountMinor: bigint }) {
    return (p.amountMinor / 100n).toString();
  }

  /** 3 % fee, bigint arithmetic. */
  @ResolveField('fee') fee(@Parent() p: { amountMinor: bigint }) {
    return ((p.amountMinor * 3n) / 100n).toString();
  }
}

describe('GraphQL: a bigint returned through graphql-scalars BigInt, read by a field resolver', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;
  beforeAll(async () => {
    db = await createMigratedDatabase('gql_bigint');
    ({ app, url } = await startGraphqlApp({
      db,
      typeDefs,
      providers: [PaymentsResolver],
      graphql: { resolvers: { BigInt: GraphQLBigInt } },
    }));
  }, GRAPHQL_APP_START_MS);
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each([
    ['unselected, bigint division', '{ id major }'],
    ['unselected, bigint multiplication', '{ id fee }'],
    ['selected beside the resolver', '{ id amountMinor major fee }'],
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
