/**
 * Custom scalars give resolvers values JSON cannot write as they are: graphql-scalars' BigInt
 * (a bigint past 2^53, which JSON.stringify throws on: every keyed call with a large amount failed)
 * and a value class keeping its data private (`#cents`, methods as fields: JSON writes `{}`, so
 * another amount with the key was answered with the first one's response).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication } from '@nestjs/common';
import { Args, Mutation, Query, Resolver } from '@nestjs/graphql';
import { GraphQLScalarType } from 'graphql';
import { GraphQLBigInt } from 'graphql-scalars';
import { randomUUID } from 'node:crypto';
import { Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { GRAPHQL_APP_START_MS, startGraphqlApp } from '../fixtures/graphql-app.js';
import { Executions } from '../fixtures/payments.fixture.js';

const exec = new Executions();

class Money {
  readonly #cents: bigint;
  constructor(cents: bigint) {
    this.#cents = cents;
  }
  format = (): string => `${this.#cents / 100n}.${String(this.#cents % 100n).padStart(2, '0')}`;
}

const MoneyScalar = new GraphQLScalarType({
  name: 'Money',
  parseValue: (value) => new Money(BigInt(Math.round(Number(value) * 100))),
  serialize: (value) => (value as Money).format(),
});

const typeDefs = `
  scalar BigInt
  scalar Money
  type Transfer { id: ID!, amount: String!, run: Int! }
  type Query { ping: String! }
  type Mutation { transferWei(amount: BigInt!): Transfer!, transfer(amount: Money!): Transfer! }
`;

@Resolver()
class TransfersResolver {
  @Query('ping')
  ping() {
    return 'pong';
  }

  @Mutation('transferWei')
  @Idempotent()
  transferWei(@Args('amount') amount: bigint | number) {
    const run = exec.hit('wei');
    return { id: `tr_${run}`, amount: String(amount), run };
  }

  @Mutation('transfer')
  @Idempotent()
  transfer(@Args('amount') amount: Money) {
    const run = exec.hit('money');
    return { id: `tr_${run}`, amount: amount.format(), run };
  }
}

describe('keyed mutations with custom scalar arguments', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;

  const send = async (key: string, field: string, type: string, amount: string) => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({
        query: `mutation($a: ${type}!) { ${field}(amount: $a) { id amount run } }`,
        variables: { a: amount },
      }),
    });
    return (await res.json()) as {
      data?: Record<string, { id: string; amount: string; run: number }> | null;
      errors?: { message: string; extensions: Record<string, unknown> }[];
    };
  };

  beforeAll(async () => {
    db = await createMigratedDatabase('e12scalars');
    ({ app, url } = await startGraphqlApp({
      db,
      typeDefs,
      providers: [TransfersResolver],
      graphql: { resolvers: { BigInt: GraphQLBigInt, Money: MoneyScalar } },
    }));
  }, GRAPHQL_APP_START_MS);
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('hashes a bigint amount: runs once, replays, another amount refused', async () => {
    const key = randomUUID();
    const first = await send(key, 'transferWei', 'BigInt', '1500000000000000000');
    expect(first.errors).toBeUndefined();
    expect(first.data?.transferWei.amount).toBe('1500000000000000000');
    const retry = await send(key, 'transferWei', 'BigInt', '1500000000000000000');
    expect(retry.data?.transferWei).toEqual(first.data?.transferWei);
    const other = await send(key, 'transferWei', 'BigInt', '1500000000000000001');
    expect(other.errors?.[0].extensions).toMatchObject({
      code: 'idempotency_key_reused_with_different_params',
    });
    expect(exec.count('wei')).toBe(1);
  });

  it('refuses a value object JSON cannot see into, never answering one amount with another', async () => {
    const key = randomUUID();
    const first = await send(key, 'transfer', 'Money', '10.00');
    expect(first.errors?.[0].extensions).toMatchObject({ code: 'idempotency_misconfigured' });
    const other = await send(key, 'transfer', 'Money', '9000.00');
    expect(other.errors?.[0].extensions).toMatchObject({ code: 'idempotency_misconfigured' });
    expect(exec.count('money')).toBe(0);
  });
});
