import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import {
  completeUntilStored,
  CompletionRetryShutdown,
  fallbackCompletions,
} from '../../lib/execution/completion-retry.js';
import type { Completion, Lease } from '../../lib/interfaces/idempotency-store.interface.js';
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
  const state = { refusing: true, attempts: 0, renewals: 0 };
  const complete = store.complete.bind(store);
  const renew = store.renew.bind(store);
  store.complete = async (l, c) => {
    state.attempts++;
    if (state.refusing) throw new Error('refused');
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

  it('stops when the module is destroyed', async () => {
    const { store, ctx, state, errors } = await refusingStore();
    await completeUntilStored(ctx, fallbackCompletions(completion));
    await jest.advanceTimersByTimeAsync(100);
    const attempts = state.attempts;
    await new CompletionRetryShutdown(store).onModuleDestroy();
    await jest.advanceTimersByTimeAsync(60_000);
    expect(state.attempts).toBe(attempts);
    expect(errors.at(-1)).toContain('frees when its lease ends');
  });
});
