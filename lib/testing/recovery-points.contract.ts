import assert from 'node:assert/strict';
import type {
  ClaimOutcome,
  ClaimRequest,
  Completion,
  IdempotencyStore,
  Lease,
} from '../interfaces/idempotency-store.interface.js';
import type { StoreContractRunner } from './contract-runner.js';

/** What the recovery-point tests get from the store contract. */
export interface RecoveryPointsFixture {
  store(): IdempotencyStore;
  advance(seconds: number): Promise<void>;
  request(over?: Partial<ClaimRequest>): ClaimRequest;
  completion(): Completion;
  hash(text: string): string;
  leaseSeconds: number;
  ttlSeconds: number;
}

const claimed = (outcome: ClaimOutcome): Lease => {
  if (outcome.type !== 'claimed') throw new Error(`expected claimed, got ${outcome.type}`);
  return outcome.lease;
};

/** `loadStep`/`saveStep` (optional): what `ctx.step()` relies on, when the store has them. */
export function recoveryPointsContract(
  it: StoreContractRunner['it'],
  f: RecoveryPointsFixture,
): void {
  const steps = () => {
    const store = f.store();
    if (!store.loadStep || !store.saveStep) return null;
    return {
      store,
      load: store.loadStep.bind(store),
      save: store.saveStep.bind(store),
    };
  };

  it('recovery points: committed per record, never visible to another record or a stale lease', async () => {
    const s = steps();
    if (!s) return assert.equal(f.store().saveStep, undefined);
    const req = f.request();
    const l = claimed(await s.store.claim(req));
    assert.equal(l.run ?? 1, 1);
    assert.equal(await s.load(l, 'charge'), null);
    assert.equal(await s.save(l, 'charge', '{"id":"ch_1"}'), true);
    assert.equal(await s.load(l, 'charge'), '{"id":"ch_1"}');
    // Once per record: a second result for the name is refused, the first kept.
    assert.equal(await s.save(l, 'charge', '{"id":"ch_2"}'), false);
    assert.equal(await s.load(l, 'charge'), '{"id":"ch_1"}');
    // Another scope (key, endpoint, user) never sees it.
    for (const other of [{ endpoint: 'POST /refunds' }, { userId: 'user-2' }]) {
      const o = claimed(await s.store.claim(f.request({ ...other, key: req.key })));
      assert.equal(await s.load(o, 'charge'), null);
    }
    const fresh = claimed(await s.store.claim(f.request()));
    assert.equal(await s.load(fresh, 'charge'), null);
    // A forged token reads and writes nothing.
    assert.equal(await s.load({ ...l, token: fresh.token }, 'charge'), null);
    assert.equal(await s.save({ ...l, token: fresh.token }, 'refund', '1'), false);
  });

  it('recovery points: a takeover of an abandoned run of the same request resumes them, one run more', async () => {
    const s = steps();
    if (!s) return;
    const req = f.request();
    const first = claimed(await s.store.claim(req));
    assert.equal(await s.save(first, 'charge', '{"id":"ch_1"}'), true);
    await f.advance(f.leaseSeconds + 1);
    const second = claimed(await s.store.claim(req));
    assert.notEqual(second.token, first.token);
    assert.equal(second.run, 2);
    assert.equal(await s.load(second, 'charge'), '{"id":"ch_1"}');
    // The abandoned run is fenced: it can no longer add a step.
    assert.equal(await s.save(first, 'email', 'true'), false);
    assert.equal(await s.save(second, 'email', 'true'), true);
    await f.advance(f.leaseSeconds + 1);
    const third = claimed(await s.store.claim(req));
    assert.equal(third.run, 3);
    assert.equal(await s.load(third, 'email'), 'true');
    assert.notEqual(await s.store.complete(third, f.completion()), null);
  });

  it('recovery points: never carried to another request, nor to a new operation after expiry', async () => {
    const s = steps();
    if (!s) return;
    const req = f.request();
    const abandoned = claimed(await s.store.claim(req));
    await s.save(abandoned, 'charge', '1');
    await f.advance(f.leaseSeconds + 1);
    const other = claimed(await s.store.claim({ ...req, requestHash: f.hash('other') }));
    assert.equal(other.run ?? 1, 1);
    assert.equal(await s.load(other, 'charge'), null);
    await s.save(other, 'charge', '2');
    assert.notEqual(await s.store.complete(other, f.completion()), null);
    await f.advance(f.ttlSeconds + 1);
    const renewed = claimed(await s.store.claim({ ...req, requestHash: f.hash('other') }));
    assert.equal(renewed.run ?? 1, 1);
    assert.equal(await s.load(renewed, 'charge'), null);
  });
}
