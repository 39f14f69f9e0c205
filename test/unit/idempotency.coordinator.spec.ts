import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { lastValueFrom, Observable, of, Subject } from 'rxjs';
import type { DataSource } from 'typeorm';
import { ProblemCode } from '../../lib/idempotency.constants.js';
import { resolveIdempotencyOptions } from '../../lib/idempotency-options.resolve.js';
import { IdempotencyCoordinator } from '../../lib/execution/idempotency.coordinator.js';
import { captureValue, encodeValue } from '../../lib/transports/value/value-capture.js';

const encode = (value: unknown) => encodeValue(value, 1_000_000);
import { ReplayCache } from '../../lib/execution/replay-cache.js';
import type { IdempotentRoute } from '../../lib/execution/idempotent-route.resolver.js';
import type {
  ClaimOutcome,
  ClaimRequest,
  CompletedRecord,
  Completion,
  IdempotencyStore,
} from '../../lib/interfaces/idempotency-store.interface.js';

/** An in-process store: the coordinator's decisions only, no storage semantics under test. */
class FakeStore implements Partial<IdempotencyStore> {
  next: ClaimOutcome | Error = { type: 'claimed', lease: { id: 'r1', token: 't1' } };
  claims: ClaimRequest[] = [];
  completions: Completion[] = [];
  released = 0;
  record: CompletedRecord = { expiresAt: new Date('2030-01-01T00:00:00Z'), secondsLeft: 30 };
  async claim(request: ClaimRequest) {
    this.claims.push(request);
    if (this.next instanceof Error) throw this.next;
    return this.next;
  }
  async complete(_lease: unknown, completion: Completion) {
    this.completions.push(completion);
    return this.record;
  }
  async release() {
    this.released++;
    return true;
  }
  async renew() {
    return true;
  }
}

const route: IdempotentRoute = {
  ttlSeconds: 86_400,
  required: false,
  transactional: false,
  storeResponse: 'full',
  ownsResponse: false,
  successStatus: 201,
};
const scope = { key: 'k1', endpoint: 'Mutation.pay', userId: 'u1' };
const attempt = { scope, requestHash: 'h1', route };
const stored = { statusCode: 200, headers: {}, body: Buffer.from('{"id":1}') };

describe('IdempotencyCoordinator (transport-free decisions)', () => {
  let store: FakeStore;
  let cache: ReplayCache;
  let audit: { record: jest.Mock };
  let coordinator: IdempotencyCoordinator;

  beforeEach(() => {
    store = new FakeStore();
    cache = new ReplayCache({ maxEntries: 10, maxBytes: 1 << 20, ttlSeconds: 3600 });
    audit = { record: jest.fn() };
    const options = resolveIdempotencyOptions({ dataSource: {} as DataSource });
    const logger = new Logger('test');
    jest.spyOn(logger, 'error').mockImplementation(() => undefined);
    coordinator = new IdempotencyCoordinator(
      options,
      store as unknown as IdempotencyStore,
      audit,
      cache,
      logger,
    );
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('claimed: executes, claiming with the route ttl and the lease length', async () => {
    const decision = await coordinator.decide(attempt);
    expect(decision.type).toBe('execute');
    expect(store.claims).toEqual([
      { ...scope, requestHash: 'h1', ttlSeconds: 86_400, leaseSeconds: 60 },
    ]);
  });

  const expiresAt = new Date('2026-12-04T00:00:00Z');
  it.each([
    ['in_progress', ProblemCode.InProgress],
    ['mismatch', ProblemCode.Mismatch],
  ] as const)('%s: rejects with its code, audited against the record', async (type, code) => {
    store.next = { type, recordId: 'r1', expiresAt };
    expect(await coordinator.decide(attempt)).toEqual({ type: 'reject', code });
    expect(audit.record).toHaveBeenCalledWith('r1', expiresAt, type);
  });

  it('a store that throws: rejects as unavailable (fail closed), nothing executes', async () => {
    store.next = new Error('connection refused');
    expect(await coordinator.decide(attempt)).toEqual({
      type: 'reject',
      code: ProblemCode.StoreUnavailable,
    });
  });

  it('completed: replays, audits once answered, then serves from the cache for the life the database gave', async () => {
    jest.useFakeTimers({ now: new Date('2020-01-01T00:00:00Z') });
    const expiresAt = new Date('2030-01-01T00:00:00Z');
    store.next = {
      type: 'completed',
      recordId: 'r9',
      expiresAt,
      secondsLeft: 10,
      response: stored,
    };
    const replay = { type: 'replay', response: stored, recordId: 'r9', expiresAt };
    const decision = await coordinator.decide(attempt);
    expect(decision).toEqual(replay);
    // Audited only once the transport says the replay reached the caller.
    expect(audit.record).not.toHaveBeenCalled();
    coordinator.answered(decision as typeof replay);
    expect(audit.record).toHaveBeenCalledWith('r9', expiresAt, 'replay');
    store.next = new Error('not asked');
    // The app clock says 2020 and expires_at says 2030: the entry still dies with secondsLeft,
    // counted on the monotonic clock.
    jest.advanceTimersByTime(8_000);
    expect(await coordinator.decide(attempt)).toEqual(replay);
    expect(store.claims).toHaveLength(1);
    jest.advanceTimersByTime(2_000);
    expect((await coordinator.decide(attempt)).type).toBe('reject');
    expect(store.claims).toHaveLength(2);
  });

  it('a cached response is only replayed for the same request', async () => {
    store.next = {
      type: 'completed',
      recordId: 'r9',
      expiresAt: new Date(),
      secondsLeft: 60,
      response: stored,
    };
    await coordinator.decide(attempt);
    store.next = { type: 'mismatch' };
    expect(await coordinator.decide({ ...attempt, requestHash: 'other' })).toEqual({
      type: 'reject',
      code: ProblemCode.Mismatch,
    });
  });

  it('execute: the stored outcome is cached for the secondsLeft the completion returned', async () => {
    jest.useFakeTimers({
      now: new Date('2020-01-01T00:00:00Z'),
      doNotFake: ['nextTick', 'setImmediate'],
    });
    const decision = await coordinator.decide(attempt);
    if (decision.type !== 'execute') throw new Error(decision.type);
    const value = await lastValueFrom(
      decision.execution.run(
        [],
        { handle: () => of({ id: 7 }) },
        captureValue(encode, async () => new Error('x'), true),
      ),
    );
    expect(value).toEqual({ id: 7 });
    expect(store.completions).toHaveLength(1);
    store.next = new Error('not asked');
    jest.advanceTimersByTime(28_000);
    const replay = await coordinator.decide(attempt);
    expect(replay.type).toBe('replay');
    expect(store.claims).toHaveLength(1);
    jest.advanceTimersByTime(2_000);
    expect((await coordinator.decide(attempt)).type).toBe('reject');
  });

  it('execute: the caller hears once that the run is concluded, not before its handler settled', async () => {
    const decision = await coordinator.decide(attempt);
    if (decision.type !== 'execute') throw new Error(decision.type);
    const ended = jest.fn();
    const handler = new Subject<unknown>();
    const result = lastValueFrom(
      decision.execution.run(
        [],
        { handle: () => handler },
        captureValue(encode, async () => new Error('x'), true),
        { ended },
      ),
    );
    await new Promise((r) => setImmediate(r));
    expect(ended).not.toHaveBeenCalled();
    handler.next({ id: 7 });
    handler.complete();
    await expect(result).resolves.toEqual({ id: 7 });
    expect(store.completions).toHaveLength(1);
    expect(ended).toHaveBeenCalledTimes(1);
  });

  it('execute: the caller hears once that the run is concluded when its key is freed', async () => {
    const decision = await coordinator.decide(attempt);
    if (decision.type !== 'execute') throw new Error(decision.type);
    const ended = jest.fn();
    const failing = { handle: () => new Observable((s) => s.error(new Error('boom'))) };
    await expect(
      lastValueFrom(
        decision.execution.run(
          [],
          failing,
          captureValue(encode, async () => new Error('x'), true),
          {
            ended,
          },
        ),
      ),
    ).rejects.toThrow('boom');
    expect(store.released).toBe(1);
    expect(ended).toHaveBeenCalledTimes(1);
  });

  it('execute: a handler that throws frees the key and stores nothing', async () => {
    const decision = await coordinator.decide(attempt);
    if (decision.type !== 'execute') throw new Error(decision.type);
    const failing = {
      handle: () => new Observable((s) => s.error(new Error('boom'))),
    };
    await expect(
      lastValueFrom(
        decision.execution.run(
          [],
          failing,
          captureValue(encode, async () => new Error('x'), true),
        ),
      ),
    ).rejects.toThrow('boom');
    expect(store.completions).toHaveLength(0);
    expect(store.released).toBe(1);
  });
});
