/**
 * Field resolvers run again on a replay read a Date where the mutation returned one: on a nested
 * object or list that the parent's resolver reads (under graphql-scalars' DateTime, which also
 * sends a string back as it is), and under two aliases in either order. Each answered `data: null`
 * on the retry of a successful payment: found by helper-66. Only the names of such fields are
 * stored: a value the schema did not send (a masked card number) never lands in the records
 * table, and unselected fields are not read (helper-67).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication } from '@nestjs/common';
import { Mutation, Parent, Query, ResolveField, Resolver } from '@nestjs/graphql';
import { GraphQLScalarType } from 'graphql';
import { GraphQLDateTime } from 'graphql-scalars';
import { randomUUID } from 'node:crypto';
import { Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { GRAPHQL_APP_START_MS, postGraphql, startGraphqlApp } from '../fixtures/graphql-app.js';

const typeDefs = `
  scalar DateTime
  scalar MaskedPan
  enum Status { PAID PENDING }
  type Charge { id: ID!, createdAt: DateTime! }
  type Payment {
    id: ID!, status: Status!, charge: Charge!, charges: [Charge!]!, chargedOn: String!, firstOn: String!
    card: MaskedPan!, createdAt: DateTime!, day: String!
  }
  type Query { ping: String! }
  type Mutation { pay: Payment! }
`;
/** graphql-scalars' DateTime, a common choice: it serializes a Date or an ISO string. */
const DateTime = GraphQLDateTime;
/** An output scalar that masks a secret: only the last four digits are sent. */
const MaskedPan = new GraphQLScalarType({
  name: 'MaskedPan',
  serialize: (pan) => `**** ${String(pan).slice(-4)}`,
});
const PAN = '4111111111111111';
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
    return { id: `pay_${charges}`, status: 'paid', charge, charges: [charge], createdAt: charge.createdAt, card: PAN }; // prettier-ignore
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
        resolvers: { DateTime, MaskedPan, Status: { PAID: 'paid', PENDING: 'pending' } },
      },
    }));
  }, GRAPHQL_APP_START_MS);
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each([
    ['a Date on a selected nested object', '{ id charge { id createdAt } chargedOn }'],
    ['a Date on a selected list of objects', '{ id charges { id createdAt } firstOn }'],
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

  it.each(['{ id card }', '{ id day }'])(
    '%s: a masked value never lands in the records table (found by helper-67)',
    async (selection) => {
      const key = randomUUID();
      const first = await postGraphql(url, `mutation { pay ${selection} }`, key);
      expect(first.errors).toBeUndefined();
      expect(await postGraphql(url, `mutation { pay ${selection} }`, key)).toEqual(first);
      const rows = await db.records('idempotency_key = $1', [key]);
      expect(rows).toHaveLength(1);
      expect(JSON.stringify(rows)).not.toContain(PAN);
      expect(rows[0].response_raw.toString()).not.toContain(PAN);
    },
  );
});
