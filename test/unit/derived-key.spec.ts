import { describe, expect, it } from '@jest/globals';
import { IdempotencyContext } from '../../lib/index.js';
import { deriveKey, derivedKeySecret } from '../../lib/recovery/derived-key.js';
import { RecoveryPoints } from '../../lib/recovery/recovery-points.js';
import { InMemoryIdempotencyStore } from '../../lib/testing/index.js';
import type { IdempotencyScope } from '../../lib/interfaces/idempotency-store.interface.js';

const secret = derivedKeySecret('s'.repeat(32))!;
const scope: IdempotencyScope = { key: 'key-1', endpoint: 'POST /charges', userId: 'u1' };

/** A context as a run of the record sees it, on its own store instance (another app instance). */
function context(s = scope, key = secret): IdempotencyContext {
  const ctx = new IdempotencyContext(s);
  const lease = { id: 'r', token: 't', claimed: { ...s, requestHash: 'h' } };
  ctx.bindRecoveryPoints(new RecoveryPoints(new InMemoryIdempotencyStore(), lease, s, key, false));
  return ctx;
}

describe('ctx.keyFor()', () => {
  it('is the same for the same scope and name, on every run and instance', () => {
    const key = context().keyFor('charge');
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(context().keyFor('charge')).toBe(key);
    // Another instance: its own secret object from the same configured value.
    expect(context(scope, derivedKeySecret(Buffer.from('s'.repeat(32)))!).keyFor('charge')).toBe(
      key,
    );
  });

  it('differs across key, endpoint, user, name and secret, and does not contain the inbound key', () => {
    const keys = [
      context().keyFor('charge'),
      context().keyFor('refund'),
      context({ ...scope, key: 'key-2' }).keyFor('charge'),
      context({ ...scope, endpoint: 'POST /refunds' }).keyFor('charge'),
      context({ ...scope, userId: 'u2' }).keyFor('charge'),
      context(scope, derivedKeySecret('t'.repeat(32))!).keyFor('charge'),
      // Field boundaries are not ambiguous: 'a|b' + 'c' is not 'a' + 'b|c'.
      context({ ...scope, key: 'key-1charge' }).keyFor(''.padEnd(1, 'x')),
    ];
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys[0]).not.toContain(scope.key);
    expect(deriveKey(secret, scope, 'charge')).toBe(keys[0]);
  });

  it('needs the secret, a name, and a key', () => {
    expect(() => context(scope, null as never).keyFor('charge')).toThrow(/derivedKeySecret/);
    expect(() => context().keyFor('')).toThrow(/1 to 255 characters/);
    expect(() => new IdempotencyContext(scope).keyFor('charge')).toThrow(/no idempotency key/);
    expect(() => derivedKeySecret('short')).toThrow(/at least 32 bytes/);
    expect(derivedKeySecret(undefined)).toBeNull();
  });
});

describe('ctx.step()', () => {
  it('refuses transactional routes with a clear error, before calling fn', async () => {
    const ctx = new IdempotencyContext(scope);
    const lease = { id: 'r', token: 't' };
    ctx.bindRecoveryPoints(
      new RecoveryPoints(new InMemoryIdempotencyStore(), lease, scope, secret, true),
    );
    let calls = 0;
    await expect(ctx.step('charge', () => ++calls)).rejects.toThrow(
      /not available on transactional routes/,
    );
    expect(calls).toBe(0);
  });

  it('needs a store with recovery points (a custom store without them)', async () => {
    const memory = new InMemoryIdempotencyStore();
    const { claim, complete, recordReplays, release, renew, cleanup } = memory;
    const bare = { claim, complete, recordReplays, release, renew, cleanup };
    const ctx = new IdempotencyContext(scope);
    ctx.bindRecoveryPoints(new RecoveryPoints(bare, { id: 'r', token: 't' }, scope, secret, false));
    let calls = 0;
    await expect(ctx.step('charge', () => ++calls)).rejects.toThrow(/loadStep and saveStep/);
    expect(calls).toBe(0);
    // keyFor needs no store support.
    expect(ctx.keyFor('charge')).toBe(deriveKey(secret, scope, 'charge'));
  });

  it('runs fn once per name in a run (even concurrently), a throwing step again', async () => {
    const store = new InMemoryIdempotencyStore();
    const claim = await store.claim({
      ...scope,
      requestHash: 'h',
      ttlSeconds: 60,
      leaseSeconds: 60,
    });
    if (claim.type !== 'claimed') throw new Error(claim.type);
    const ctx = new IdempotencyContext(scope);
    ctx.bindRecoveryPoints(new RecoveryPoints(store, claim.lease, scope, secret, false));
    let calls = 0;
    const charge = async () => ({ id: `ch_${++calls}`, at: new Date(0) });
    const [a, b] = await Promise.all([ctx.step('charge', charge), ctx.step('charge', charge)]);
    expect(calls).toBe(1);
    // The JSON copy, the same value a resumed run gets.
    expect(a).toEqual({ id: 'ch_1', at: '1970-01-01T00:00:00.000Z' });
    expect(b).toEqual(a);
    await expect(ctx.step('mail', () => Promise.reject(new Error('smtp down')))).rejects.toThrow(
      'smtp down',
    );
    expect(await ctx.step('mail', () => 'sent')).toBe('sent');
  });
});
