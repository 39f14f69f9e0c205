/** `ctx.keyFor()` and `ctx.step()` in a GraphQL mutation resolver: the same as HTTP. */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication } from '@nestjs/common';
import { Args, Mutation, Query, Resolver } from '@nestjs/graphql';
import { randomUUID } from 'node:crypto';
import { type IdempotencyContext, IdempotencyCtx, Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { GRAPHQL_APP_START_MS, startGraphqlApp } from '../fixtures/graphql-app.js';
import { endLease, stepsCommitted } from '../fixtures/abandoned-run.js';

const typeDefs = `
  type Charge { id: ID!, processorKey: String!, run: Int! }
  type Query { ping: String! }
  type Mutation { charge(amount: Int!): Charge! }
`;

let charges = 0;
let hold: Promise<void> | undefined;

@Resolver()
class ChargesResolver {
  @Query('ping')
  ping() {
    return 'pong';
  }

  @Mutation('charge')
  @Idempotent()
  async charge(@Args('amount') amount: number, @IdempotencyCtx() idem?: IdempotencyContext) {
    const processorKey = idem!.keyFor('charge');
    const charge = await idem!.step('charge', () => ({ id: `ch_${++charges}_${amount}` }));
    const wait = hold;
    hold = undefined;
    await wait;
    return { id: charge.id, processorKey, run: idem!.run };
  }
}

describe('recovery points in a GraphQL mutation', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;

  const mutate = async (key: string) => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ query: 'mutation { p: charge(amount: 5) { id processorKey run } }' }),
    });
    return (await res.json()) as {
      data?: { p: { id: string; processorKey: string; run: number } };
    };
  };

  beforeAll(async () => {
    db = await createMigratedDatabase('recovery_graphql');
    ({ app, url } = await startGraphqlApp({
      db,
      typeDefs,
      providers: [ChargesResolver],
      idempotency: { derivedKeySecret: 'g'.repeat(32) },
    }));
  }, GRAPHQL_APP_START_MS);
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('resumes a run abandoned after its step; another key derives another processor key', async () => {
    const key = randomUUID();
    let release!: () => void;
    hold = new Promise<void>((resolve) => (release = resolve));
    const abandoned = mutate(key);
    await stepsCommitted(db.dataSource, key);
    await endLease(db.dataSource, key);
    const before = charges;
    const resumed = await mutate(key);
    release();
    await abandoned;
    expect(charges).toBe(before);
    expect(resumed.data?.p).toEqual({
      id: `ch_${before}_5`,
      processorKey: expect.stringMatching(/^[0-9a-f]{64}$/),
      run: 2,
    });
    const other = await mutate(randomUUID());
    expect(other.data?.p.processorKey).toMatch(/^[0-9a-f]{64}$/);
    expect(other.data?.p.processorKey).not.toBe(resumed.data?.p.processorKey);
  });
});
