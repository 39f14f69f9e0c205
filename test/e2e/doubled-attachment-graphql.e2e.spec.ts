/**
 * `@Idempotent()` on a class and on its method (or a class-level one over methods with their own
 * interceptors): the class's attachment steps aside for the method's, so one call is handled once
 * whatever an app interceptor between or around them does (`retry()`, a hedge, a cache that
 * answers without calling on). Found by a review attacking an earlier fix that told the two
 * attachments apart with per-call state: a retry between them ran the handler with no claim.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CallHandler,
  ExecutionContext,
  type INestApplication,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import { Args, Mutation, Query, Resolver } from '@nestjs/graphql';
import { randomUUID } from 'node:crypto';
import { retry, timer } from 'rxjs';
import { Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { GRAPHQL_APP_START_MS, postGraphql, startGraphqlApp } from '../fixtures/graphql-app.js';

const typeDefs = `
  type Query { ping: String! }
  type Mutation { pay(ref: String!): Int! }
`;
const runs = new Map<string, number>();

@Injectable()
class RetryOnce implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(retry({ count: 1, delay: () => timer(100) }));
  }
}

@Idempotent()
@Resolver()
class PayResolver {
  @Query('ping') ping() {
    return 'pong';
  }
  @Mutation('pay')
  @Idempotent()
  @UseInterceptors(RetryOnce)
  pay(@Args('ref') ref: string) {
    const n = (runs.get(ref) ?? 0) + 1;
    runs.set(ref, n);
    if (n === 1) throw new Error('flaky before charging');
    return n;
  }
}

describe('resolver class+method with method-level retry()', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;
  const gql = (query: string, key?: string) => postGraphql(url, query, key);
  beforeAll(async () => {
    db = await createMigratedDatabase('doubled_gql');
    ({ app, url } = await startGraphqlApp({
      db,
      typeDefs,
      providers: [PayResolver],
    }));
  }, GRAPHQL_APP_START_MS);
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('retried run is claimed; a client retry with the same key replays', async () => {
    const ref = randomUUID();
    const key = randomUUID();
    const q = `mutation { pay(ref: "${ref}") }`;
    const a = await gql(q, key);
    const rows = await db.records('idempotency_key = $1', [key]);
    const b = await gql(q, key);
    expect({ a, b, runs: runs.get(ref), rows: rows.map((r) => r.status) }).toEqual({
      a: { data: { pay: 2 } },
      b: { data: { pay: 2 } },
      runs: 2,
      rows: ['completed'],
    });
  });
});
