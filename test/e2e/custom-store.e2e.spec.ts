import { afterEach, describe, expect, it } from '@jest/globals';
import { Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, Idempotent, REPLAYED_HEADER } from '../../lib/index.js';
import { InMemoryIdempotencyStore } from '../../lib/testing/index.js';
import { send } from '../fixtures/http-client.js';
import { startFixtureApp, type FixtureApp, type Platform } from '../fixtures/payments.fixture.js';

describe.each<Platform>(['express', 'fastify'])('a custom store (%s)', (platform) => {
  let f: FixtureApp | undefined;
  afterEach(async () => {
    await f?.close();
    f = undefined;
  });

  it('serves keyed requests from the store option alone: no DataSource, no PostgreSQL', async () => {
    const store = new InMemoryIdempotencyStore();
    f = await startFixtureApp({ platform, options: { store } });
    const key = randomUUID();
    const first = await send(f.url, '/charges', { key, body: { amount: 5 } });
    const again = await send(f.url, '/charges', { key, body: { amount: 5 } });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers[REPLAYED_HEADER.toLowerCase()]).toBe('true');
    expect(f.exec.count('charge')).toBe(1);
    expect((await send(f.url, '/charges', { key, body: { amount: 6 } })).status).toBe(409);
    expect(store.size).toBe(1);
  });
});

describe('a custom store without transactions', () => {
  it.each([
    [true, 'true', 'beginTransaction'],
    ['single' as const, "'single'", 'claimInTransaction'],
  ])(
    'refuses to start when a route is transactional: %s, naming the route',
    async (mode, shown, method) => {
      @Controller()
      class LedgerController {
        @Post('entries')
        @Idempotent({ transactional: mode })
        add() {
          return { ok: true };
        }
      }
      @Module({
        imports: [IdempotencyModule.forRoot({ store: new InMemoryIdempotencyStore() })],
        controllers: [LedgerController],
      })
      class LedgerModule {}
      const app = await NestFactory.create(LedgerModule, { logger: false });
      const started = await app.init().catch((err: Error) => err);
      await app.close();
      expect(started).toBeInstanceOf(Error);
      expect((started as Error).message).toContain(
        `LedgerController.add is @Idempotent({ transactional: ${shown} }) but the store (InMemoryIdempotencyStore) has no ${method}()`,
      );
    },
  );
});
