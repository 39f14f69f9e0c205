import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { scopeLockKey } from '../../lib/store/postgres/scope-lock.js';

describe('scopeLockKey', () => {
  // The key as releases before the one-shot hash derived it: instances of an older release and
  // this one, running side by side in a rolling deploy, must take the same advisory lock.
  const asDerivedBefore = (table: string, key: string, endpoint: string, userId: string) =>
    createHash('sha256')
      .update(JSON.stringify([table, key, endpoint, userId]))
      .digest()
      .readBigInt64BE(0)
      .toString();

  const scopes = Array.from({ length: 200 }, (_, i) => ({
    key: `key-${i}-ünï-😀`,
    endpoint: i % 2 ? 'POST /payments' : 'PUT /orders/:id',
    userId: i % 3 ? `user-${i}` : '',
  }));

  it('derives the key older releases derived, for negative and positive keys alike', () => {
    const keys = scopes.map((s) => scopeLockKey('idempotency_keys', s));
    expect(keys).toEqual(
      scopes.map((s) => asDerivedBefore('idempotency_keys', s.key, s.endpoint, s.userId)),
    );
    expect(keys.some((k) => k.startsWith('-'))).toBe(true);
    expect(keys.some((k) => !k.startsWith('-'))).toBe(true);
  });

  it('is a bigint PostgreSQL takes, different per table and per scope', () => {
    const scope = scopes[1];
    const key = BigInt(scopeLockKey('idempotency_keys', scope));
    expect(key >= -(2n ** 63n) && key < 2n ** 63n).toBe(true);
    expect(scopeLockKey('other_keys', scope)).not.toBe(key.toString());
    expect(new Set(scopes.map((s) => scopeLockKey('t', s))).size).toBe(scopes.length);
  });
});
