import assert from 'node:assert/strict';
import type { ClaimOutcome, Lease } from '../interfaces/idempotency-store.interface.js';
import { anyOf, assertMatch } from './contract-match.js';
import type { StoreContractRunner } from './contract-runner.js';
import type { RecoveryPointsFixture } from './recovery-points.contract.js';

/** What the `peek` tests get from the store contract: the same as the recovery-point tests. */
export type PeekFixture = RecoveryPointsFixture;

const claimed = (outcome: ClaimOutcome): Lease => {
  if (outcome.type !== 'claimed') throw new Error(`expected claimed, got ${outcome.type}`);
  return outcome.lease;
};

/**
 * `peek` (optional): what a HEAD on a GET route relies on to replay without ever claiming. A
 * store without it passes (HEAD then claims and releases at once).
 */
export function peekContract(it: StoreContractRunner['it'], f: PeekFixture): void {
  const peeking = () => {
    const store = f.store();
    return store.peek ? { store, peek: store.peek.bind(store) } : null;
  };

  it('peek, when the store has it: reads what a claim would see, and never claims', async () => {
    const p = peeking();
    if (!p) return assert.equal(f.store().peek, undefined);
    const req = f.request();
    assert.deepEqual(await p.peek(req, req.requestHash), { type: 'absent' });
    // Nothing was written: the first claim still wins.
    const l = claimed(await p.store.claim(req));
    assertMatch(await p.peek(req, req.requestHash), { type: 'in_progress' });
    assertMatch(await p.peek(req, f.hash('b')), { type: 'mismatch' });
    assert.deepEqual(await p.peek({ ...req, userId: 'user-2' }, req.requestHash), {
      type: 'absent',
    });
    const done = await p.store.complete(l, f.completion());
    const peeked = await p.peek(req, req.requestHash);
    const { body, statusCode, headers } = f.completion();
    assertMatch(peeked, {
      type: 'completed',
      recordId: l.id,
      expiresAt: done?.expiresAt,
      secondsLeft: anyOf(Number),
      response: { statusCode, headers, body },
    });
    assertMatch(await p.store.claim(req), { type: 'completed', recordId: l.id });
  });

  it('peek, when the store has it: a claim sent with any number of peeks is granted', async () => {
    const p = peeking();
    if (!p) return assert.equal(f.store().peek, undefined);
    const req = f.request();
    const peeks = Array.from({ length: 6 }, () => p.peek(req, req.requestHash));
    const [claim] = await Promise.all([p.store.claim(req), ...peeks]);
    assert.equal(claim.type, 'claimed');
  });

  it('peek, when the store has it: a record past its TTL or its lease is absent, and stays', async () => {
    const p = peeking();
    if (!p) return assert.equal(f.store().peek, undefined);
    const done = f.request({ ttlSeconds: 60 });
    await p.store.complete(claimed(await p.store.claim(done)), {
      ...f.completion(),
      ttlSeconds: 60,
    });
    const running = f.request();
    claimed(await p.store.claim(running));
    await f.advance(f.leaseSeconds + 61);
    assert.deepEqual(await p.peek(done, done.requestHash), { type: 'absent' });
    assert.deepEqual(await p.peek(running, running.requestHash), { type: 'absent' });
    // Not taken over by the peek: the next claim of each is what takes it over.
    assert.equal((await p.store.claim(done)).type, 'claimed');
    assert.equal((await p.store.claim(running)).type, 'claimed');
  });
}
