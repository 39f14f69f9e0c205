/**
 * `@Idempotent({ required: true })` on a resolver class with queries and field resolvers: the
 * mutation runs once per key and replays; queries and field resolvers under it are never refused
 * nor deduplicated (the class's attachment and the refusal of a call that comes again).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication } from '@nestjs/common';
import { Args, Mutation, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { randomUUID } from 'node:crypto';
import { Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { GRAPHQL_APP_START_MS, postGraphql, startGraphqlApp } from '../fixtures/graphql-app.js';

const typeDefs = `
  type Payment { id: ID!, amount: Int!, run: Int!, receipt: String! }
  type Query { ping: String!, payment(id: ID!): Payment! }
  type Mutation { createPayment(amount: Int!): Payment! }
`;
let runs = 0;

@Idempotent({ required: true })
@Resolver('Payment')
class PaymentsResolver {
  @Query('ping') ping() {
    return 'pong';
  }
  @Query('payment') payment(@Args('id') id: string) {
    return { id, amount: 1, run: 0 };
  }
  @Mutation('createPayment')
  createPayment(@Args('amount') amount: number) {
    runs++;
    return { id: `pay_${runs}`, amount, run: runs };
  }
  @ResolveField('receipt') receipt(@Parent() p: { id: string }) {
    return `r_${p.id}`;
  }
}

describe('class-level @Idempotent() on a resolver with field resolvers', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;
  const gql = (query: string, key?: string) => postGraphql(url, query, key);
  beforeAll(async () => {
    db = await createMigratedDatabase('gql_class');
    ({ app, url } = await startGraphqlApp({
      db,
      typeDefs,
      providers: [PaymentsResolver],
      graphql: { fieldResolverEnhancers: ['interceptors', 'guards'] },
    }));
  }, GRAPHQL_APP_START_MS);
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('mutation once per key, field resolvers and queries unaffected', async () => {
    const key = randomUUID();
    const q = 'mutation { createPayment(amount: 5) { id run receipt } }';
    const a = await gql(q, key);
    const b = await gql(q, key);
    expect(a).toEqual({ data: { createPayment: { id: 'pay_1', run: 1, receipt: 'r_pay_1' } } });
    expect(b).toEqual(a);
    expect(
      await gql('{ ping a: payment(id: "1") { receipt } b: payment(id: "2") { receipt } }'),
    ).toEqual({
      data: { ping: 'pong', a: { receipt: 'r_1' }, b: { receipt: 'r_2' } },
    });
    expect(runs).toBe(1);
  });
});
