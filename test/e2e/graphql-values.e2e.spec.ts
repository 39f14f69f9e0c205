import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { type INestApplication, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Args, GraphQLModule, Int, Mutation, Parent, Query, ResolveField } from '@nestjs/graphql';
import { Resolver } from '@nestjs/graphql';
import { randomUUID } from 'node:crypto';
import { type IdempotencyContext, IdempotencyCtx, Idempotent } from '../../lib/index.js';
import { IdempotencyModule, ProblemCode } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Account, Attempt, Ledger, Payment, PaymentStatus } from './graphql-values.types.js';

const runs = { pay: 0, raw: 0, ledger: 0, large: 0, attempt: 0 };

function payment(n: number, amount: number): Payment {
  const p: Payment = {
    id: `pay_${n}`,
    amount: BigInt(amount) * 10n ** 18n,
    small: BigInt(amount),
    price: amount,
    createdAt: new Date(Date.UTC(2026, 0, 2, 3, 4, 5, n)),
    settledAt: new Date(Date.UTC(2026, 0, 3)),
    meta: { card: { last4: '4242' }, tries: [1, 2], when: new Date(Date.UTC(2026, 0, 1)) },
    status: PaymentStatus.Settled,
    tags: [['a', 'b'], [], ['c']],
    lines: [{ label: 'fee', qty: null }, null, { label: 'item', qty: 2 }],
    note: null,
  };
  // A cycle through fields GraphQL only walks as far as the query asks.
  p.account = { id: `acc_${n}`, payments: [p] };
  return p;
}

@Resolver(() => Payment)
@Idempotent()
class PaymentsResolver {
  @Query(() => String)
  ping() {
    return 'pong';
  }

  @Mutation(() => Payment)
  pay(@Args('amount', { type: () => Int }) amount: number) {
    return payment(++runs.pay, amount);
  }

  @Mutation(() => [Payment])
  payMany(@Args('n', { type: () => Int }) n: number) {
    runs.pay++;
    return Array.from({ length: n }, (_, i) => payment(i, 1));
  }

  @Mutation(() => Payment)
  payRaw() {
    runs.raw++;
    return { ...payment(0, 1), raw: 10n };
  }

  @Mutation(() => [Attempt])
  attempt() {
    runs.attempt++;
    return [
      payment(runs.attempt, 9),
      { reason: 'card declined', at: new Date(Date.UTC(2026, 1, 1)) },
    ];
  }

  @Mutation(() => [Payment])
  payLarge(@Args('n', { type: () => Int }) n: number) {
    runs.large++;
    const note = 'x'.repeat(1_000);
    return Array.from({ length: n }, (_, i) => ({ ...payment(i, 1), note }));
  }

  @Mutation(() => Ledger)
  @Idempotent({ transactional: true })
  async ledgerFail(@IdempotencyCtx() idem?: IdempotencyContext): Promise<Ledger> {
    await idem!.manager!.query('INSERT INTO gql_values_ledger (amount) VALUES (-1)');
    throw new Error('declined after the write');
  }

  @Mutation(() => Ledger)
  @Idempotent({ transactional: true })
  async ledger(
    @Args('amount', { type: () => Int }) amount: number,
    @IdempotencyCtx() idem?: IdempotencyContext,
  ) {
    runs.ledger++;
    const [row] = await idem!.manager!.query(
      'INSERT INTO gql_values_ledger (amount) VALUES ($1) RETURNING id',
      [amount],
    );
    return { id: row.id, amount };
  }

  /** A read under a class-level @Idempotent(): never deduplicated. */
  @ResolveField(() => String)
  receipt(@Parent() p: Payment) {
    return `receipt-for-${p.id}`;
  }
}

@Resolver(() => Account)
class AccountsResolver {
  @ResolveField(() => String)
  @Idempotent()
  label(@Parent() a: Account) {
    return `label-of-${a.id}`;
  }
}

describe('GraphQL values (Apollo, code-first): what is stored is what the client got', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;

  type Answer = {
    data?: Record<string, any> | null;
    errors?: { message: string; extensions?: any }[];
  };
  const gql = async (key: string | undefined, query: string, variables = {}): Promise<Answer> => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      body: JSON.stringify({ query, variables }),
    });
    return (await res.json()) as Answer;
  };

  beforeAll(async () => {
    db = await createMigratedDatabase('gqlvalues');
    await db.dataSource.query('CREATE TABLE gql_values_ledger (id serial PRIMARY KEY, amount int)');
    @Module({
      imports: [
        GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          autoSchemaFile: true,
          fieldResolverEnhancers: ['interceptors'],
        }),
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      providers: [PaymentsResolver, AccountsResolver],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    url = `${await app.getUrl()}/graphql`;
  });

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const FULL = `mutation($a: Int!) { p: pay(amount: $a) {
    id amount small price createdAt settledAt meta status tags note
    lines { label qty } first: lines { label } account { id label payments { id status } }
    ... on Payment { again: createdAt }
  } }`;

  it('a replay gives the data of the first call: Nest dates, graphql-scalars, custom scalars, enums, lists, nulls', async () => {
    const key = randomUUID();
    const before = runs.pay;
    const first = await gql(key, FULL, { a: 5 });
    expect(first.errors).toBeUndefined();
    expect(first.data?.p).toMatchObject({
      amount: '5000000000000000000',
      small: 5,
      price: 'EUR 0.05',
      createdAt: expect.stringMatching(/^2026-01-02T03:04:05/),
      settledAt: Date.UTC(2026, 0, 3),
      meta: { card: { last4: '4242' }, when: '2026-01-01T00:00:00.000Z' },
      status: 'Settled',
      tags: [['a', 'b'], [], ['c']],
      lines: [{ label: 'fee', qty: null }, null, { label: 'item', qty: 2 }],
      note: null,
      account: { label: `label-of-acc_${before + 1}`, payments: [{ status: 'Settled' }] },
    });
    const replays = [await gql(key, FULL, { a: 5 }), await gql(key, FULL, { a: 5 })];
    expect(replays).toEqual([first, first]);
    expect(runs.pay).toBe(before + 1);
  });

  it('a cyclic object graph: only the selected fields are encoded, the answer and its replay are whole', async () => {
    const key = randomUUID();
    const heap = process.memoryUsage().heapUsed;
    const deep = `mutation { p: pay(amount: 1) { id account { id payments { id account { payments { id createdAt } } } } } }`;
    const first = await gql(key, deep);
    expect(first.errors).toBeUndefined();
    expect(first.data?.p.account.payments[0].account.payments[0].id).toBe(first.data?.p.id);
    expect(await gql(key, deep)).toEqual(first);
    const [row] = await db.records('idempotency_key = $1', [key]);
    expect(JSON.stringify(row.response_body).length).toBeLessThan(1_000);
    expect(process.memoryUsage().heapUsed - heap).toBeLessThan(200 * 1024 * 1024);
  });

  it('a value larger than maxResponseBytes: the encoding stops there, the client gets it, retries say not replayable', async () => {
    const key = randomUUID();
    const query = `mutation { ps: payLarge(n: 2000) { id note } }`;
    const first = await gql(key, query);
    expect(first.data?.ps).toHaveLength(2000);
    const retry = await gql(key, query);
    expect(retry.errors?.[0].extensions).toMatchObject({ code: ProblemCode.NotReplayable });
    expect(runs.large).toBe(1);
  });

  it('a union (its own resolveType): each member replays as its type, with fragments and __typename', async () => {
    const key = randomUUID();
    const query = `mutation { a: attempt {
      __typename
      ... on Payment { id createdAt status }
      ... on Declined { reason at }
    } }`;
    const first = await gql(key, query);
    expect(first.errors).toBeUndefined();
    expect(first.data?.a).toEqual([
      expect.objectContaining({ __typename: 'Payment', status: 'Settled' }),
      { __typename: 'Declined', reason: 'card declined', at: '2026-02-01T00:00:00.000Z' },
    ]);
    expect(await gql(key, query)).toEqual(first);
    expect(runs.attempt).toBe(1);
  });

  it('the same key with another selection or other variables is a different request', async () => {
    const key = randomUUID();
    await gql(key, `mutation($a: Int!) { p: pay(amount: $a) { id } }`, { a: 2 });
    const before = runs.pay;
    const otherSelection = await gql(key, `mutation($a: Int!) { p: pay(amount: $a) { id note } }`, {
      a: 2,
    });
    const otherVariables = await gql(key, `mutation($a: Int!) { p: pay(amount: $a) { id } }`, {
      a: 3,
    });
    for (const answer of [otherSelection, otherVariables]) {
      expect(answer.errors?.[0].extensions).toMatchObject({ code: ProblemCode.Mismatch });
    }
    const spaced = await gql(key, `mutation ($a: Int!) {\n  p: pay(amount: $a) {\n    id\n  }\n}`, {
      a: 2,
    });
    expect(spaced.errors).toBeUndefined();
    expect(runs.pay).toBe(before);
  });

  it('field resolvers are reads: every parent gets its own value (class-level and field-level @Idempotent)', async () => {
    const key = randomUUID();
    const query = `mutation { ps: payMany(n: 3) { id receipt account { label } } }`;
    const first = await gql(key, query);
    expect(first.errors).toBeUndefined();
    expect(first.data?.ps).toEqual(
      [0, 1, 2].map((i) => ({
        id: `pay_${i}`,
        receipt: `receipt-for-pay_${i}`,
        account: { label: `label-of-acc_${i}` },
      })),
    );
    expect(await gql(key, query)).toEqual(first);
    const rows = await db.records('idempotency_key = $1', [key]);
    expect(rows.map((r) => r.endpoint)).toEqual(['Mutation.payMany']);
  });

  it('a value the library cannot encode after the mutation ran: never run again, retries say not replayable', async () => {
    const key = randomUUID();
    const query = `mutation { p: payRaw { id raw } }`;
    await gql(key, query);
    const retry = await gql(key, query);
    expect(retry.errors?.[0].extensions).toMatchObject({
      code: ProblemCode.NotReplayable,
      problem: { original_status: 200 },
    });
    expect(runs.raw).toBe(1);
    const [row] = await db.records('idempotency_key = $1', [key]);
    expect(row).toMatchObject({ status: 'completed', response_body: null });
  });

  it('a transactional mutation that is not required, without a key: the handler has a manager', async () => {
    const query = `mutation { l: ledger(amount: 77) { id amount } }`;
    const first = await gql(undefined, query);
    const second = await gql(undefined, query);
    expect([first.errors, second.errors]).toEqual([undefined, undefined]);
    expect(second.data?.l.id).not.toBe(first.data?.l.id);
    const rows = await db.dataSource.query('SELECT id FROM gql_values_ledger WHERE amount = 77');
    expect(rows).toHaveLength(2);
    const failed = await gql(undefined, `mutation { l: ledgerFail { id } }`);
    expect(failed.errors?.[0].message).toBe('declined after the write');
    expect(await db.dataSource.query('SELECT id FROM gql_values_ledger WHERE amount = -1')).toEqual(
      [],
    );
  });
});
