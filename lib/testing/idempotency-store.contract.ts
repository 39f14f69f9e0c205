import { createHash, randomUUID } from 'node:crypto';
import type {
  ClaimOutcome,
  ClaimRequest,
  Completion,
  IdempotencyStore,
  Lease,
} from '../store/idempotency-store.interface.js';

/** What the contract needs of a store under test. */
export interface StoreContractHarness {
  /** A store with no records (called before each test). */
  store: IdempotencyStore;
  /** Moves the store's clock forward (the PostgreSQL harness shifts the rows' timestamps back). */
  advance(seconds: number): Promise<void>;
  /** Called after each test. */
  close?(): Promise<void>;
}

/**
 * The test runner's globals, read when the contract is called (jest injects them; so does vitest
 * with `globals: true`): importing the in-memory store alone needs no test runner installed.
 */
interface RunnerGlobals {
  describe(name: string, fn: () => void): void;
  it(name: string, fn: () => Promise<void> | void, timeout?: number): void;
  beforeEach(fn: () => Promise<void> | void): void;
  afterEach(fn: () => Promise<unknown> | void): void;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  expect: ((value: unknown) => any) & { any(type: unknown): any };
}

function runnerGlobals(): RunnerGlobals {
  const g = globalThis as unknown as Partial<RunnerGlobals>;
  if (!g.describe || !g.it || !g.expect || !g.beforeEach || !g.afterEach) {
    throw new Error(
      'idempotencyStoreContract() runs inside a test runner that provides describe/it/expect globals (jest, or vitest with globals: true)',
    );
  }
  return g as RunnerGlobals;
}

const LEASE = 30;
const TTL = 600;
const hash = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * The guarantees every `IdempotencyStore` gives (see the interface), as tests: call it at the
 * top level of a spec file, under jest (or vitest with `globals: true`).
 * @example
 * idempotencyStoreContract(async () => {
 *   let t = Date.now();
 *   return { store: new MyStore({ now: () => t }), advance: async (s) => void (t += s * 1000) };
 * });
 */
export function idempotencyStoreContract(createStore: () => Promise<StoreContractHarness>): void {
  const { describe, it, expect, beforeEach, afterEach } = runnerGlobals();
  describe('IdempotencyStore contract', () => {
    let h: StoreContractHarness;
    beforeEach(async () => {
      h = await createStore();
    });
    afterEach(async () => h?.close?.());

    const request = (over: Partial<ClaimRequest> = {}): ClaimRequest => ({
      key: randomUUID(),
      endpoint: 'POST /charges',
      userId: 'user-1',
      requestHash: hash('a'),
      ttlSeconds: TTL,
      leaseSeconds: LEASE,
      ...over,
    });
    const completion = (over: Partial<Completion> = {}): Completion => ({
      statusCode: 201,
      headers: { 'content-type': 'application/json', location: '/charges/1' },
      body: Buffer.from('{"id":"ch_1","amount":1e3}'),
      transactionId: 'ch_1',
      ttlSeconds: TTL,
      ...over,
    });
    const lease = (outcome: ClaimOutcome): Lease => {
      if (outcome.type !== 'claimed') throw new Error(`expected claimed, got ${outcome.type}`);
      return outcome.lease;
    };
    const types = (outcomes: ClaimOutcome[]) => outcomes.map((o) => o.type).sort();
    const race = (req: ClaimRequest, n = 8) =>
      Promise.all(Array.from({ length: n }, () => h.store.claim(req)));

    it('claims a new scope, then reports it in progress; another request is a mismatch', async () => {
      const req = request();
      const first = lease(await h.store.claim(req));
      expect(first).toMatchObject({ id: expect.any(String), token: expect.any(String) });
      expect((await h.store.claim(req)).type).toBe('in_progress');
      expect((await h.store.claim({ ...req, requestHash: hash('b') })).type).toBe('mismatch');
      // Another endpoint or user is another scope.
      expect((await h.store.claim({ ...req, endpoint: 'POST /refunds' })).type).toBe('claimed');
      expect((await h.store.claim({ ...req, userId: 'user-2' })).type).toBe('claimed');
    });

    it('gives exactly one of many concurrent claims of one scope', async () => {
      const outcomes = await race(request());
      expect(types(outcomes)).toEqual(['claimed', ...Array(7).fill('in_progress')]);
    });

    it('single-commit, when the store has claimInTransaction: scope held while open, free at once on rollback, replayed once committed', async () => {
      if (!h.store.claimInTransaction) {
        // Not supported: single-commit routes then refuse to start (see TransactionalRoutesCheck).
        expect(h.store.claimInTransaction).toBeUndefined();
        return;
      }
      const req = request();
      const first = await h.store.claimInTransaction(req);
      if (first.type !== 'claimed') throw new Error(`expected claimed, got ${first.type}`);
      expect((await h.store.claimInTransaction(req)).type).toBe('in_progress');
      expect((await h.store.claim(req)).type).toBe('in_progress');
      await first.transaction.rollback();
      const again = await h.store.claimInTransaction(req);
      if (again.type !== 'claimed') throw new Error(`expected claimed, got ${again.type}`);
      expect(await h.store.complete(again.lease, completion(), again.transaction)).toMatchObject({
        secondsLeft: expect.any(Number),
      });
      await again.transaction.commit();
      const replay = await h.store.claimInTransaction(req);
      expect(replay).toMatchObject({ type: 'completed', response: { statusCode: 201 } });
      expect((await h.store.claim(req)).type).toBe('completed');
    });

    it('replays a completed record: status, headers, bytes, record id and remaining life', async () => {
      const req = request();
      const l = lease(await h.store.claim(req));
      const done = await h.store.complete(l, completion());
      expect(done?.secondsLeft).toBeGreaterThan(TTL - 5);
      expect(done?.secondsLeft).toBeLessThanOrEqual(TTL);
      const replay = await h.store.claim(req);
      expect(replay).toMatchObject({
        type: 'completed',
        recordId: l.id,
        expiresAt: done?.expiresAt,
        response: {
          statusCode: 201,
          headers: { 'content-type': 'application/json', location: '/charges/1' },
          body: Buffer.from('{"id":"ch_1","amount":1e3}'),
        },
      });
      const { secondsLeft } = replay as { secondsLeft: number };
      expect(secondsLeft).toBeGreaterThan(TTL - 5);
      expect((await h.store.claim({ ...req, requestHash: hash('b') })).type).toBe('mismatch');
    });

    it('says why a completed record has no body: too large, or a digest only', async () => {
      const big = request();
      await h.store.complete(lease(await h.store.claim(big)), completion({ body: null }));
      expect(await h.store.claim(big)).toMatchObject({
        type: 'completed',
        response: { statusCode: 201, body: null, omitted: 'too_large' },
      });
      const digest = request();
      await h.store.complete(
        lease(await h.store.claim(digest)),
        completion({ body: null, headers: {}, bodyDigest: hash('body') }),
      );
      expect(await h.store.claim(digest)).toMatchObject({
        type: 'completed',
        response: { statusCode: 201, body: null, omitted: 'digest' },
      });
    });

    it('fences a replaced lease: it can neither complete, renew nor release', async () => {
      const req = request();
      const old = lease(await h.store.claim(req));
      await h.advance(LEASE + 1);
      const current = lease(await h.store.claim(req));
      expect(current.token).not.toBe(old.token);
      expect(await h.store.complete(old, completion())).toBeNull();
      expect(await h.store.renew(old, LEASE)).toBe(false);
      expect(await h.store.release(old)).toBe(false);
      expect((await h.store.claim(req)).type).toBe('in_progress');
      // A forged token on the current record is fenced too.
      const forged = { ...current, token: randomUUID() };
      expect(await h.store.complete(forged, completion())).toBeNull();
      expect(await h.store.renew(forged, LEASE)).toBe(false);
      expect(await h.store.release(forged)).toBe(false);
      expect(await h.store.complete(current, completion())).not.toBeNull();
    });

    it('lets exactly one of many take over a claim past its lease', async () => {
      const req = request();
      const old = lease(await h.store.claim(req));
      await h.advance(LEASE - 5);
      expect((await h.store.claim(req)).type).toBe('in_progress');
      await h.advance(10);
      const outcomes = await race(req);
      expect(types(outcomes)).toEqual(['claimed', ...Array(7).fill('in_progress')]);
      expect(lease(outcomes.find((o) => o.type === 'claimed')!).token).not.toBe(old.token);
    });

    it('treats a completed record past its TTL as new: exactly one of many takes it over', async () => {
      const req = request({ ttlSeconds: 60 });
      const first = lease(await h.store.claim(req));
      await h.store.complete(first, completion({ ttlSeconds: 60 }));
      await h.advance(55);
      expect((await h.store.claim(req)).type).toBe('completed');
      await h.advance(10);
      const outcomes = await race({ ...req, requestHash: hash('other request') });
      expect(types(outcomes)).toEqual(['claimed', ...Array(7).fill('in_progress')]);
      const taken = lease(outcomes.find((o) => o.type === 'claimed')!);
      expect(taken.id).not.toBe(first.id);
      expect((await h.store.claim(req)).type).toBe('mismatch');
    });

    it('releases an in-progress claim so the next claim runs again, never a completed one', async () => {
      const req = request();
      const l = lease(await h.store.claim(req));
      expect(await h.store.release(l)).toBe(true);
      expect(await h.store.release(l)).toBe(false);
      const again = lease(await h.store.claim(req));
      await h.store.complete(again, completion());
      expect(await h.store.release(again)).toBe(false);
      expect((await h.store.claim(req)).type).toBe('completed');
    });

    it('renews a lease so the claim outlives it; a completed record is not renewed', async () => {
      const req = request();
      const l = lease(await h.store.claim(req));
      await h.advance(LEASE - 5);
      expect(await h.store.renew(l, LEASE)).toBe(true);
      await h.advance(LEASE - 5);
      expect((await h.store.claim(req)).type).toBe('in_progress');
      expect(await h.store.complete(l, completion())).not.toBeNull();
      expect(await h.store.renew(l, LEASE)).toBe(false);
    });

    it('records replays without changing what replays', async () => {
      const req = request();
      const l = lease(await h.store.claim(req));
      const done = (await h.store.complete(l, completion()))!;
      await h.store.recordReplays([
        {
          recordId: l.id,
          count: 2,
          firstReplayedMsAgo: 1000,
          replayedMsAgo: 0,
          expiresAt: done.expiresAt,
        },
      ]);
      await h.store.recordReplays([]);
      expect(await h.store.claim(req)).toMatchObject({ type: 'completed', recordId: l.id });
    });

    it('cleans up records past expiry plus retention, never a live one', async () => {
      const expired = request({ ttlSeconds: 60 });
      await h.store.complete(lease(await h.store.claim(expired)), completion({ ttlSeconds: 60 }));
      const live = request({ ttlSeconds: 86_400 });
      await h.store.complete(lease(await h.store.claim(live)), completion({ ttlSeconds: 86_400 }));
      const running = request({ ttlSeconds: 60, leaseSeconds: 7200 });
      lease(await h.store.claim(running));
      await h.advance(120);
      const kept = await h.store.cleanup({ batchSize: 100, retentionSeconds: 3600 });
      expect(kept).toMatchObject({ deleted: 0 });
      await h.advance(3600);
      const result = await h.store.cleanup({ batchSize: 100, retentionSeconds: 60 });
      expect(result).toMatchObject({ ran: true, deleted: 1 });
      expect((await h.store.claim(live)).type).toBe('completed');
      expect((await h.store.claim(running)).type).toBe('in_progress');
    });
  });
}
