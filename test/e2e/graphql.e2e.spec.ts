import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication } from '@nestjs/common';
import { Args, Mutation, Query, Resolver } from '@nestjs/graphql';
import { randomUUID } from 'node:crypto';
import { from } from 'rxjs';
import {
  type IdempotencyContext,
  IdempotencyCtx,
  Idempotent,
  ProblemCode,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { GRAPHQL_APP_START_MS, startGraphqlApp } from '../fixtures/graphql-app.js';

const typeDefs = `
  type Payment { id: ID!, amount: Int!, run: Int!, createdAt: String! }
  type Query { ping: String! }
  type Mutation {
    createPayment(amount: Int!): Payment!
    failPayment(amount: Int!): Payment!
    scoped(amount: Int!): Payment!
    ledger(amount: Int!): Payment!
    streamed(amount: Int!): Payment!
  }
`;

let runs = 0;
let failures = 0;

@Resolver()
class PaymentsResolver {
  @Query('ping')
  ping() {
    return 'pong';
  }

  @Mutation('createPayment')
  @Idempotent()
  createPayment(@Args('amount') amount: number) {
    runs++;
    return { id: `pay_${runs}`, amount, run: runs, createdAt: new Date().toISOString() };
  }

  @Mutation('scoped')
  @Idempotent({ endpoint: 'payments.scoped' })
  scoped(@Args('amount') amount: number, @IdempotencyCtx() ctx: IdempotencyContext | undefined) {
    runs++;
    ctx?.setTransactionId(`tx_${runs}`);
    return { id: `${ctx?.scope.endpoint}:${ctx?.scope.key}`, amount, run: runs, createdAt: '' };
  }

  @Mutation('ledger')
  @Idempotent({ transactional: true })
  async ledger(
    @Args('amount') amount: number,
    @IdempotencyCtx() ctx: IdempotencyContext | undefined,
  ) {
    runs++;
    const [row] = await ctx!.manager!.query(
      'INSERT INTO gql_ledger (amount) VALUES ($1) RETURNING id',
      [amount],
    );
    return { id: `led_${row.id}`, amount, run: runs, createdAt: '' };
  }

  /** An Observable of several values: GraphQL answers with the last one. */
  @Mutation('streamed')
  @Idempotent()
  streamed(@Args('amount') amount: number) {
    runs++;
    const run = runs;
    return from([1, 2].map((part) => ({ id: `part_${part}`, amount, run, createdAt: '' })));
  }

  @Mutation('failPayment')
  @Idempotent()
  failPayment() {
    failures++;
    throw new Error('card declined');
  }
}

describe('@Idempotent() on GraphQL mutations (Apollo)', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;

  const mutate = async (key: string | undefined, amount: number, field = 'createPayment') => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      body: JSON.stringify({
        query: `mutation($a: Int!) { p: ${field}(amount: $a) { id amount run createdAt } }`,
        variables: { a: amount },
      }),
    });
    return (await res.json()) as {
      data?: { p: { id: string; amount: number; run: number; createdAt: string } } | null;
      errors?: { message: string; extensions: Record<string, unknown> }[];
    };
  };

  beforeAll(async () => {
    db = await createMigratedDatabase('graphql');
    await db.dataSource.query('CREATE TABLE gql_ledger (id serial PRIMARY KEY, amount int)');
    ({ app, url } = await startGraphqlApp({
      db,
      typeDefs,
      providers: [PaymentsResolver],
    }));
  }, GRAPHQL_APP_START_MS);

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('runs a mutation once per key and replays the same data, stored as the value', async () => {
    const key = randomUUID();
    const before = runs;
    const first = await mutate(key, 500);
    const second = await mutate(key, 500);
    expect(first.errors).toBeUndefined();
    expect(first.data?.p.amount).toBe(500);
    expect(second).toEqual(first);
    expect(runs).toBe(before + 1);
    const [row] = await db.records('idempotency_key = $1', [key]);
    expect(row).toMatchObject({ endpoint: 'Mutation.createPayment', status: 'completed' });
    expect(row.response_body).toMatchObject({ id: first.data?.p.id, amount: 500 });
  });

  it("a resolver's Observable: its last value is the answer, stored and replayed", async () => {
    const key = randomUUID();
    const before = runs;
    const first = await mutate(key, 7, 'streamed');
    expect(first.data?.p).toMatchObject({ id: 'part_2', amount: 7 });
    expect(await mutate(key, 7, 'streamed')).toEqual(first);
    expect(runs).toBe(before + 1);
  });

  it('the same key with other arguments: a GraphQL error with the problem code, nothing runs', async () => {
    const key = randomUUID();
    await mutate(key, 1);
    const before = runs;
    const reused = await mutate(key, 2);
    expect(reused.data).toBeNull();
    expect(reused.errors?.[0].extensions).toMatchObject({
      code: ProblemCode.Mismatch,
      status: 409,
    });
    expect(runs).toBe(before);
  });

  it('without a key the mutation runs every time; a bad key is refused', async () => {
    const before = runs;
    await mutate(undefined, 3);
    await mutate(undefined, 3);
    expect(runs).toBe(before + 2);
    const bad = await mutate('has space', 3);
    expect(bad.errors?.[0].extensions).toMatchObject({ code: ProblemCode.KeyInvalid });
    expect(runs).toBe(before + 2);
  });

  it('@IdempotencyCtx() and the endpoint option work on a resolver', async () => {
    const key = randomUUID();
    const first = await mutate(key, 6, 'scoped');
    expect(first.data?.p.id).toBe(`payments.scoped:${key}`);
    expect(await mutate(key, 6, 'scoped')).toEqual(first);
    const [row] = await db.records('idempotency_key = $1', [key]);
    expect(row).toMatchObject({
      endpoint: 'payments.scoped',
      transaction_id: `tx_${first.data?.p.run}`,
    });
  });

  it('transactional: the resolver writes commit with the stored outcome, once', async () => {
    const key = randomUUID();
    const first = await mutate(key, 9, 'ledger');
    expect(first.errors).toBeUndefined();
    expect(await mutate(key, 9, 'ledger')).toEqual(first);
    const rows = await db.dataSource.query('SELECT amount FROM gql_ledger WHERE amount = 9');
    expect(rows).toHaveLength(1);
  });

  it('a resolver that throws stores nothing: the key is free, a retry runs again', async () => {
    const key = randomUUID();
    const first = await mutate(key, 4, 'failPayment');
    expect(first.errors?.[0].message).toBe('card declined');
    await mutate(key, 4, 'failPayment');
    expect(failures).toBe(2);
    expect(await db.records('idempotency_key = $1', [key])).toEqual([]);
  });
});
