/**
 * A request that only replays (HEAD on a GET route) reads the store with `peek` and never
 * claims; a store without `peek` keeps the older claim-and-release.
 */
import { describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { ProblemCode } from '../../lib/idempotency.constants.js';
import { resolveIdempotencyOptions } from '../../lib/idempotency-options.resolve.js';
import { IdempotencyCoordinator } from '../../lib/execution/idempotency.coordinator.js';
import { ReplayCache } from '../../lib/execution/replay-cache.js';
import type { IdempotentRoute } from '../../lib/execution/idempotent-route.resolver.js';
import { InMemoryIdempotencyStore } from '../../lib/testing/index.js';

const route: IdempotentRoute = {
  ttlSeconds: 600,
  required: false,
  transactional: false,
  storeResponse: 'full',
  ownsResponse: false,
  successStatus: 200,
};
const scope = { key: 'k1', endpoint: 'GET /exports/:id', userId: 'u1' };
const head = { scope, requestHash: 'h1', route, replayOnly: true };

function coordinatorOver(store: InMemoryIdempotencyStore) {
  const options = resolveIdempotencyOptions({ dataSource: {} as DataSource });
  const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1 << 20, ttlSeconds: 3600 });
  return new IdempotencyCoordinator(options, store, { record: jest.fn() }, cache, new Logger('t'));
}

describe('IdempotencyCoordinator, replay-only requests', () => {
  it('peeks and never claims: nothing yet is NothingToReplay, a running GET is in progress', async () => {
    const store = new InMemoryIdempotencyStore();
    const claim = jest.spyOn(store, 'claim');
    const coordinator = coordinatorOver(store);
    expect(await coordinator.decide(head)).toEqual({
      type: 'reject',
      code: ProblemCode.NothingToReplay,
    });
    expect([claim.mock.calls.length, store.size]).toEqual([0, 0]);
    const get = await coordinator.decide({ ...head, replayOnly: false });
    expect(get.type).toBe('execute');
    expect(await coordinator.decide(head)).toEqual({
      type: 'reject',
      code: ProblemCode.InProgress,
    });
    expect(claim.mock.calls.length).toBe(1);
  });

  it('replays the completed GET from a peek', async () => {
    const store = new InMemoryIdempotencyStore();
    const outcome = await store.claim({
      ...scope,
      requestHash: 'h1',
      ttlSeconds: 600,
      leaseSeconds: 60,
    });
    if (outcome.type !== 'claimed') throw new Error(outcome.type);
    const body = Buffer.from('{"export":"exp_1"}');
    await store.complete(outcome.lease, {
      statusCode: 200,
      headers: {},
      body,
      transactionId: null,
      ttlSeconds: 600,
    });
    const claim = jest.spyOn(store, 'claim');
    const decision = await coordinatorOver(store).decide(head);
    expect(decision).toMatchObject({
      type: 'replay',
      recordId: outcome.lease.id,
      response: { body },
    });
    expect(claim).not.toHaveBeenCalled();
  });

  it('a store without peek claims, as before (the caller releases it)', async () => {
    const store = new InMemoryIdempotencyStore();
    Object.defineProperty(store, 'peek', { value: undefined });
    const decision = await coordinatorOver(store).decide(head);
    expect(decision.type).toBe('execute');
    expect(store.size).toBe(1);
    if (decision.type === 'execute') await decision.execution.cancel();
    expect(store.size).toBe(0);
  });
});
