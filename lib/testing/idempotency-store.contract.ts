import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import type {
  ClaimOutcome,
  ClaimRequest,
  Completion,
  IdempotencyStore,
  Lease,
} from '../interfaces/idempotency-store.interface.js';
import { anyOf, assertMatch } from './contract-match.js';
import type { StoreContractRunner } from './contract-runner.js';

export type { StoreContractRunner };
import { recoveryPointsContract, type RecoveryPointsFixture } from './recovery-points.contract.js';
import { peekContract } from './peek.contract.js';

/** What the contract needs of a store under test. */
export interface StoreContractHarness {
  /** A store with no records (called before each test). */
  store: IdempotencyStore;
  /** Moves the store's clock forward (the PostgreSQL harness shifts the rows' timestamps back). */
  advance(seconds: number): Promise<void>;
  /** Called after each test. */
  close?(): Promise<void>;
}

function globalRunner(): StoreContractRunner {
  const g = globalThis as unknown as Partial<StoreContractRunner>;
  if (!g.describe || !g.it || !g.beforeEach || !g.afterEach) {
    throw new Error(
      "idempotencyStoreContract() needs describe/it/beforeEach/afterEach: run it under jest or vitest with globals: true, or pass them (e.g. from 'node:test') as its second argument",
    );
  }
  return g as StoreContractRunner;
}

const LEASE = 30;
const TTL = 600;
const hash = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * The guarantees every `IdempotencyStore` gives (see the interface), as tests: call it at the
 * top level of a spec file, under jest, vitest or `node:test` (pass its functions as `runner`).
 * @example
 * idempotencyStoreContract(async () => {
 *   let t = Date.now();
 *   return { store: new MyStore({ now: () => t }), advance: async (s) => void (t += s * 1000) };
 * }); // + `, { describe, it, beforeEach, afterEach }` from 'node:test'
 */
export function idempotencyStoreContract(
  createStore: () => Promise<StoreContractHarness>,
  runner: StoreContractRunner = globalRunner(),
): void {
  const { describe, it, beforeEach, afterEach } = runner;
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
      assertMatch(first, { id: anyOf(String), token: anyOf(String) });
      assert.equal((await h.store.claim(req)).type, 'in_progress');
      assert.equal((await h.store.claim({ ...req, requestHash: hash('b') })).type, 'mismatch');
      // Another endpoint or user is another scope.
      assert.equal((await h.store.claim({ ...req, endpoint: 'POST /refunds' })).type, 'claimed');
      assert.equal((await h.store.claim({ ...req, userId: 'user-2' })).type, 'claimed');
    });

    it('gives exactly one of many concurrent claims of one scope', async () => {
      const outcomes = await race(request());
      assert.deepEqual(types(outcomes), ['claimed', ...Array(7).fill('in_progress')]);
    });

    it('single-commit, when the store has claimInTransaction: scope held while open, free at once on rollback, replayed once committed', async () => {
      if (!h.store.claimInTransaction) {
        // Not supported: single-commit routes then refuse to start (see TransactionalRoutesCheck).
        assert.equal(h.store.claimInTransaction, undefined);
        return;
      }
      const req = request();
      const first = await h.store.claimInTransaction(req);
      if (first.type !== 'claimed') throw new Error(`expected claimed, got ${first.type}`);
      assert.equal((await h.store.claimInTransaction(req)).type, 'in_progress');
      assert.equal((await h.store.claim(req)).type, 'in_progress');
      await first.transaction.rollback();
      const again = await h.store.claimInTransaction(req);
      if (again.type !== 'claimed') throw new Error(`expected claimed, got ${again.type}`);
      const done = await h.store.complete(again.lease, completion(), again.transaction);
      assertMatch(done, { secondsLeft: anyOf(Number) });
      await again.transaction.commit();
      const replay = await h.store.claimInTransaction(req);
      assertMatch(replay, {
        type: 'completed',
        expiresAt: done?.expiresAt,
        response: { statusCode: 201 },
      });
      assert.equal((await h.store.claim(req)).type, 'completed');
    });

    it('replays a completed record: status, headers, bytes, record id and remaining life', async () => {
      const req = request();
      const l = lease(await h.store.claim(req));
      const done = await h.store.complete(l, completion());
      const left = done?.secondsLeft ?? NaN;
      assert.ok(left > TTL - 5 && left <= TTL, `secondsLeft ${left}`);
      const replay = await h.store.claim(req);
      assertMatch(replay, {
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
      assert.ok(secondsLeft > TTL - 5, `secondsLeft ${secondsLeft}`);
      assert.equal((await h.store.claim({ ...req, requestHash: hash('b') })).type, 'mismatch');
    });

    it('says why a completed record has no body: too large, or a digest only', async () => {
      const big = request();
      await h.store.complete(lease(await h.store.claim(big)), completion({ body: null }));
      assertMatch(await h.store.claim(big), {
        type: 'completed',
        response: { statusCode: 201, body: null, omitted: 'too_large' },
      });
      const digest = request();
      await h.store.complete(
        lease(await h.store.claim(digest)),
        completion({ body: null, headers: {}, bodyDigest: hash('body') }),
      );
      assertMatch(await h.store.claim(digest), {
        type: 'completed',
        response: { statusCode: 201, body: null, omitted: 'digest' },
      });
    });

    it('fences a replaced lease: it can neither complete, renew nor release', async () => {
      const req = request();
      const old = lease(await h.store.claim(req));
      await h.advance(LEASE + 1);
      const current = lease(await h.store.claim(req));
      assert.notEqual(current.token, old.token);
      assert.equal(await h.store.complete(old, completion()), null);
      assert.equal(await h.store.renew(old, LEASE), false);
      assert.equal(await h.store.release(old), false);
      assert.equal((await h.store.claim(req)).type, 'in_progress');
      // A forged token on the current record is fenced too.
      const forged = { ...current, token: randomUUID() };
      assert.equal(await h.store.complete(forged, completion()), null);
      assert.equal(await h.store.renew(forged, LEASE), false);
      assert.equal(await h.store.release(forged), false);
      assert.notEqual(await h.store.complete(current, completion()), null);
    });

    it('lets exactly one of many take over a claim past its lease', async () => {
      const req = request();
      const old = lease(await h.store.claim(req));
      await h.advance(LEASE - 5);
      assert.equal((await h.store.claim(req)).type, 'in_progress');
      await h.advance(10);
      const outcomes = await race(req);
      assert.deepEqual(types(outcomes), ['claimed', ...Array(7).fill('in_progress')]);
      assert.notEqual(lease(outcomes.find((o) => o.type === 'claimed')!).token, old.token);
    });

    it('treats a completed record past its TTL as new: exactly one of many takes it over', async () => {
      const req = request({ ttlSeconds: 60 });
      const first = lease(await h.store.claim(req));
      await h.store.complete(first, completion({ ttlSeconds: 60 }));
      await h.advance(55);
      assert.equal((await h.store.claim(req)).type, 'completed');
      await h.advance(10);
      const outcomes = await race({ ...req, requestHash: hash('other request') });
      assert.deepEqual(types(outcomes), ['claimed', ...Array(7).fill('in_progress')]);
      const taken = lease(outcomes.find((o) => o.type === 'claimed')!);
      assert.notEqual(taken.id, first.id);
      assert.equal((await h.store.claim(req)).type, 'mismatch');
    });

    it('releases an in-progress claim so the next claim runs again, never a completed one', async () => {
      const req = request();
      const l = lease(await h.store.claim(req));
      assert.equal(await h.store.release(l), true);
      assert.equal(await h.store.release(l), false);
      const again = lease(await h.store.claim(req));
      await h.store.complete(again, completion());
      assert.equal(await h.store.release(again), false);
      assert.equal((await h.store.claim(req)).type, 'completed');
    });

    it('renews a lease so the claim outlives it; a completed record is not renewed', async () => {
      const req = request();
      const l = lease(await h.store.claim(req));
      await h.advance(LEASE - 5);
      assert.equal(await h.store.renew(l, LEASE), true);
      await h.advance(LEASE - 5);
      assert.equal((await h.store.claim(req)).type, 'in_progress');
      assert.notEqual(await h.store.complete(l, completion()), null);
      assert.equal(await h.store.renew(l, LEASE), false);
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
      assertMatch(await h.store.claim(req), { type: 'completed', recordId: l.id });
    });

    const fixture: RecoveryPointsFixture = {
      store: () => h.store,
      advance: (seconds) => h.advance(seconds),
      request,
      completion,
      hash,
      leaseSeconds: LEASE,
      ttlSeconds: TTL,
    };
    recoveryPointsContract(it, fixture);
    peekContract(it, fixture);

    it('cleans up records past expiry plus retention, never a live one', async () => {
      const expired = request({ ttlSeconds: 60 });
      await h.store.complete(lease(await h.store.claim(expired)), completion({ ttlSeconds: 60 }));
      const live = request({ ttlSeconds: 86_400 });
      await h.store.complete(lease(await h.store.claim(live)), completion({ ttlSeconds: 86_400 }));
      const running = request({ ttlSeconds: 60, leaseSeconds: 7200 });
      lease(await h.store.claim(running));
      await h.advance(120);
      const kept = await h.store.cleanup({ batchSize: 100, retentionSeconds: 3600 });
      assertMatch(kept, { deleted: 0 });
      await h.advance(3600);
      const result = await h.store.cleanup({ batchSize: 100, retentionSeconds: 60 });
      assertMatch(result, { ran: true, deleted: 1 });
      assert.equal((await h.store.claim(live)).type, 'completed');
      assert.equal((await h.store.claim(running)).type, 'in_progress');
    });
  });
}
