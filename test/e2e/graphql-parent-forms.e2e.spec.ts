/**
 * Field resolvers run again on a replay read what they read the first time, however the mutation
 * returned its fields: a Date on a nested object or list that the parent's resolver reads (under
 * graphql-scalars' DateTime, which serializes a string too), a number exposed as `ID`, an
 * output-only scalar's raw value, an enum value the schema cannot send. Each answered otherwise
 * on the retry of a successful payment (`data: null`, `false` for `true`): found by helper-66.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication } from '@nestjs/common';
import { Mutation, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { GraphQLScalarType } from 'graphql';
import { GraphQLDateTime } from 'graphql-scalars';
import { randomUUID } from 'node:crypto';
import { Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { postGraphql, startGraphqlApp } from '../fixtures/graphql-app.js';

const typeDefs = `
  scalar DateTime
  scalar Money
  enum Status { PAID PENDING }
  type Charge { id: ID!, createdAt: DateTime! }
  type Payment {
    id: ID!, status: Status!, charge: Charge!, charges: [Charge!]!, chargedOn: String!, firstOn: String!
    amount: Money!, large: Boolean!, stage: Status!, refundable: Boolean!, invoiceId: ID!, invoiced: Boolean!, createdAt: DateTime!, day: String!
  }
  type Query { ping: String! }
  type Mutation { pay: Payment! }
`;
/** graphql-scalars' DateTime, a common choice: it serializes a Date or an ISO string. */
const DateTime = GraphQLDateTime;
/** An output scalar: integer cents out as a display string; no parseValue (graphql-js: identity). */
const Money = new GraphQLScalarType({
  name: 'Money',
  serialize: (cents) => `${(Number(cents) / 100).toFixed(2)} EUR`,
});
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
    const charge = { id: `ch_${charges}`, createdAt: new Date('2026-12-05T10:00:00Z') };
    return { id: `pay_${charges}`, status: 'paid', charge, charges: [charge], createdAt: charge.createdAt, amount: 150000, stage: 'disputed', invoiceId: 42 }; // prettier-ignore
  }

  /** Reads a Date on a selected nested object, as resolvers do. */
  @ResolveField('chargedOn') chargedOn(@Parent() p: { charge: { createdAt: Date } }) {
    return p.charge.createdAt.toISOString().slice(0, 10);
  }

  @ResolveField('firstOn') firstOn(@Parent() p: { charges: { createdAt: Date }[] }) {
    return p.charges[0].createdAt.toISOString().slice(0, 10);
  }

  @ResolveField('day') day(@Parent() p: { createdAt: Date }) {
    return p.createdAt.toISOString().slice(0, 10);
  }

  /** Looks the numeric id (a TypeORM @PrimaryGeneratedColumn exposed as ID) up in a Map. */
  @ResolveField('invoiced') invoiced(@Parent() p: { invoiceId: number }) {
    return new Map([[42, 'inv_42']]).has(p.invoiceId);
  }

  /** Reads an internal status the schema's enum does not (yet) have; \`stage\` is unselected. */
  @ResolveField('refundable') refundable(@Parent() p: { stage: string }) {
    return p.stage !== 'disputed';
  }

  /** Reads the integer cents the mutation returned. */
  @ResolveField('large') large(@Parent() p: { amount: number }) {
    return p.amount >= 100000;
  }
}

describe('a replay hands field resolvers the leaves the mutation returned', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;
  beforeAll(async () => {
    db = await createMigratedDatabase('graphql_parent_forms');
    ({ app, url } = await startGraphqlApp({
      db,
      typeDefs,
      providers: [PaymentsResolver],
      graphql: {
        resolvers: { DateTime, Money, Status: { PAID: 'paid', PENDING: 'pending' } },
      },
    }));
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each([
    ['a Date on a selected nested object', '{ id charge { id createdAt } chargedOn }'],
    ['a Date on a selected list of objects', '{ id charges { id createdAt } firstOn }'],
    ['an output-only scalar (Money) the resolver reads, unselected', '{ id large }'],
    ['an output-only scalar (Money) the resolver reads, selected', '{ id amount large }'],
    ['an internal value the enum cannot serialize, unselected', '{ id refundable }'],
    ['a numeric id exposed as ID, unselected', '{ id invoiced }'],
    ['a numeric id exposed as ID, selected', '{ id invoiceId invoiced }'],
    ['a Date on the parent itself', '{ id createdAt day }'],
    [
      'two aliases of one nested object, the Date first',
      '{ id b: charge { createdAt } a: charge { id } chargedOn }',
    ],
  ])('%s: the retry answers what the first call answered, one charge', async (_case, selection) => {
    const key = randomUUID();
    const before = charges;
    const query = `mutation { pay ${selection} }`;
    const first = await postGraphql(url, query, key);
    expect(first.errors).toBeUndefined();
    const second = await postGraphql(url, query, key);
    expect(charges).toBe(before + 1); // the retry was a replay: no second charge
    expect(second).toEqual(first);
  });
});
