import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { type INestApplication, Module } from '@nestjs/common';
import { Args, GraphQLModule, Mutation, Query, Resolver } from '@nestjs/graphql';
import { GraphQLScalarType } from 'graphql';
import { randomUUID } from 'node:crypto';
import { ReplayAuditService } from '../../lib/execution/replay-audit.service.js';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { listenApp } from '../fixtures/listen.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

/** A value class the schema's scalar insists on. */
class Money {
  constructor(readonly cents: number) {}
  toJSON() {
    return { cents: this.cents };
  }
}
const MoneyScalar = new GraphQLScalarType({
  name: 'Money',
  serialize: (value) => {
    if (!(value instanceof Money)) throw new TypeError('Money expected');
    return value.cents;
  },
});

/** The next deploy may make a field non-null: a stored `null` then fails the schema on replay. */
const typeDefs = (price: 'Money' | 'Money!') => `
  scalar Money
  type Charge { id: ID!, cents: Int!, price: ${price} }
  type Query { ping: String! }
  type Mutation { charge(amount: Int!): Charge!, priced(amount: Int!): Charge! }
`;

@Resolver()
class ChargesResolver {
  @Query('ping')
  ping() {
    return 'pong';
  }

  @Mutation('charge')
  @Idempotent()
  charge(@Args('amount') amount: number) {
    return { id: randomUUID(), cents: amount };
  }

  @Mutation('priced')
  @Idempotent()
  priced(@Args('amount') amount: number) {
    return { id: randomUUID(), cents: amount, price: amount > 0 ? new Money(amount) : null };
  }
}

/** Only GraphQL replays the schema accepted count as deduplications (issue 16.4). */
describe('GraphQL replays counted once the schema accepts them', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;

  const boot = async (price: 'Money' | 'Money!') => {
    @Module({
      imports: [
        GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          typeDefs: typeDefs(price),
          resolvers: { Money: MoneyScalar },
        }),
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          replayAuditFlushMs: 60_000,
          replayCache: false,
        }),
      ],
      providers: [ChargesResolver],
    })
    class AppModule {}
    return listenApp(AppModule);
  };

  beforeAll(async () => {
    db = await createMigratedDatabase('gql_replay_audit');
    const listening = await boot('Money');
    app = listening.app;
    url = `${listening.url}/graphql`;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const mutate = async (key: string, field: string, amount = 7, at = url) => {
    const res = await fetch(at, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({
        query: `mutation { c: ${field}(amount: ${amount}) { id cents price } }`,
      }),
    });
    return (await res.json()) as { data?: { c: { id: string } } | null; errors?: unknown[] };
  };
  const replays = async (key: string) => {
    await app.get(ReplayAuditService).flush();
    return (await db.records('idempotency_key = $1', [key]))[0].replay_count as number;
  };

  it('counts a replay the schema accepts', async () => {
    const key = randomUUID();
    const first = await mutate(key, 'charge');
    expect(await mutate(key, 'charge')).toEqual(first);
    expect(await replays(key)).toBe(1);
  });

  it('replays a value class through its scalar exactly, and counts it', async () => {
    const key = randomUUID();
    const first = await mutate(key, 'priced');
    expect(first.errors).toBeUndefined();
    expect(await mutate(key, 'priced')).toEqual(first);
    expect(await replays(key)).toBe(1);
  });

  it('does not count a replay the schema rejects (a field made non-null by the next deploy)', async () => {
    const key = randomUUID();
    const first = await mutate(key, 'priced', 0);
    expect(first.errors).toBeUndefined();
    const next = await boot('Money!');
    try {
      const replay = await mutate(key, 'priced', 0, `${next.url}/graphql`);
      expect(replay.errors).toHaveLength(1);
      await next.app.get(ReplayAuditService).flush();
    } finally {
      await next.app.close();
    }
    expect(await replays(key)).toBe(0);
  });
});
