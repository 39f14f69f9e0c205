import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import {
  abandonRetries,
  completeUntilStored,
  fallbackCompletions,
  retriesRunning,
} from '../../lib/execution/completion-retry.js';
import type { Completion, Lease } from '../../lib/interfaces/idempotency-store.interface.js';
import { IdempotencyShutdown } from '../../lib/execution/idempotency-shutdown.service.js';
import type { ResolvedIdempotencyOptions } from '../../lib/idempotency.defaults.js';
import { InMemoryIdempotencyStore } from '../../lib/testing/index.js';

const completion: Completion = {
  statusCode: 201,
  headers: { 'content-type': 'application/json' },
  body: Buffer.from('{"id":1}'),
  transactionId: 'tx-1',
  ttlSeconds: 60,
};

const claim = {
  key: 'k',
  endpoint: 'POST /pay',
  userId: '',
  requestHash: 'h',
  ttlSeconds: 60,
  leaseSeconds: 3,
};

/** An in-memory store whose completions fail while `refusing`; renewals are counted. */
async function refusingStore() {
  const store = new InMemoryIdempotencyStore();
  const outcome = await store.claim(claim);
  const lease = (outcome as { lease: Lease }).lease;
  // As pg's DatabaseError: PostgreSQL answered, refusing the write (a trigger's RAISE).
  const refusal = () => Object.assign(new Error('refused'), { severity: 'ERROR', code: 'P0001' });
  const state = { refusing: true, attempts: 0, renewals: 0, failure: refusal as () => Error };
  const complete = store.complete.bind(store);
  const renew = store.renew.bind(store);
  store.complete = async (l, c) => {
    state.attempts++;
    if (state.refusing) throw state.failure();
    return complete(l, c);
  };
  store.renew = async (l, s) => {
    state.renewals++;
    return renew(l, s);
  };
  const errors: string[] = [];
  const logger = { log() {}, warn() {}, error: (m: string) => void errors.push(m) };
  const ctx = { store, lease, leaseSeconds: 3, logger, describe: () => 'key "k"' };
  const stored = async () =>
    (await store.claim(claim)) as { type: string; response?: { body: Buffer | null } };
  return { store, ctx, state, errors, stored };
}

describe('completeUntilStored', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('falls back to the bytes alone, then to the status alone', () => {
    const [bytes, status] = fallbackCompletions(completion);
    expect(bytes).toMatchObject({ body: completion.body, bytesOnly: true, transactionId: null });
    expect(status).toMatchObject({ statusCode: 201, body: null, omitted: 'unrecorded' });
    expect(fallbackCompletions({ ...completion, body: null, omitted: 'streamed' })).toEqual([
      expect.objectContaining({ body: null, omitted: 'streamed' }),
    ]);
  });

  it('retries in the background with backoff, renewing the lease, until the store takes it', async () => {
    const { ctx, state, errors, stored } = await refusingStore();
    expect(await completeUntilStored(ctx, fallbackCompletions(completion))).toBeNull();
    expect(state.attempts).toBe(1);
    expect(errors.join()).toContain('retried in the background');
    // Backoff: 100, 200, 400, 800, then every third of the lease (1 s), each renewing the lease.
    await jest.advanceTimersByTimeAsync(100 + 200 + 400 + 800 + 1000 * 6);
    expect(state.attempts).toBe(1 + 2 * 10);
    expect(state.renewals).toBe(10);
    expect((await stored()).type).toBe('in_progress');
    state.refusing = false;
    await jest.advanceTimersByTimeAsync(1000);
    expect((await stored()).response).toMatchObject({ body: completion.body });
    const attempts = state.attempts;
    await jest.advanceTimersByTimeAsync(10_000);
    expect(state.attempts).toBe(attempts);
  });

  it('retries the bytes, not the status alone, while the writes get no answer (a dead pooled connection)', async () => {
    const { ctx, state, stored } = await refusingStore();
    // pg's error for a connection lost under a statement: no severity, no SQLSTATE.
    state.failure = () => new Error('Connection terminated unexpectedly');
    const failing = state.attempts + 3;
    const complete = ctx.store.complete.bind(ctx.store);
    ctx.store.complete = async (l, c) => {
      if (state.attempts + 1 >= failing) state.refusing = false;
      return complete(l, c);
    };
    expect(await completeUntilStored(ctx, fallbackCompletions(completion))).toBeNull();
    await jest.advanceTimersByTimeAsync(100);
    expect((await stored()).type).toBe('in_progress');
    await jest.advanceTimersByTimeAsync(200);
    expect((await stored()).response).toMatchObject({ body: completion.body });
    expect(state.attempts).toBe(3);
  });

  it('tries the status alone once the bytes went unanswered three times in a row', async () => {
    const { ctx, state, stored } = await refusingStore();
    state.failure = () => new Error('Connection terminated unexpectedly');
    const complete = ctx.store.complete.bind(ctx.store);
    ctx.store.complete = async (l, c) => {
      if (c.body === null) state.refusing = false;
      return complete(l, c);
    };
    await completeUntilStored(ctx, fallbackCompletions(completion));
    await jest.advanceTimersByTimeAsync(100 + 200);
    expect(state.attempts).toBe(3);
    expect((await stored()).type).toBe('in_progress');
    await jest.advanceTimersByTimeAsync(400);
    expect(state.attempts).toBe(5);
    expect((await stored()).response).toMatchObject({ body: null, omitted: 'unrecorded' });
  });

  it('stops when abandoned at shutdown', async () => {
    const { store, ctx, state, errors } = await refusingStore();
    await completeUntilStored(ctx, fallbackCompletions(completion));
    await jest.advanceTimersByTimeAsync(100);
    const attempts = state.attempts;
    expect(retriesRunning(store)).toBe(1);
    await abandonRetries(store);
    expect(retriesRunning(store)).toBe(0);
    await jest.advanceTimersByTimeAsync(60_000);
    expect(state.attempts).toBe(attempts);
    expect(errors.at(-1)).toContain('frees when its lease ends');
  });

  it('a shutdown that cannot wait a retry out names it (it logged "0 run(s) still in flight")', async () => {
    const { store, ctx } = await refusingStore();
    await completeUntilStored(ctx, fallbackCompletions(completion));
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    try {
      const options = { leaseSeconds: 1 } as ResolvedIdempotencyOptions;
      const draining = new IdempotencyShutdown(store, options).beforeApplicationShutdown();
      await jest.advanceTimersByTimeAsync(1_100);
      await draining;
      expect(logged.mock.calls.map(([message]) => message)).toEqual([
        expect.stringMatching(
          /^Shutting down with 0 run\(s\) in flight, 1 completion\(s\) being retried still unfinished/,
        ),
      ]);
    } finally {
      jest.restoreAllMocks();
      await abandonRetries(store);
    }
  });
});
