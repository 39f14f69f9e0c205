import { describe, expect, it } from '@jest/globals';
import { ReplayCache } from '../../lib/execution/replay-cache.js';

const put = (cache: ReplayCache, key: string, bytes = 1, secondsLeft = 3600) =>
  cache.set(
    key,
    {
      requestHash: 'h',
      recordId: key,
      expiresAt: new Date(),
      response: { statusCode: 201, headers: {}, body: Buffer.alloc(bytes) },
    },
    secondsLeft,
  );

/**
 * A deterministic pseudo-random sequence, so a failure can be replayed. It takes the high bits:
 * the low bits of this generator cycle, and with them the test once never cleared.
 */
function lcg(seed: number) {
  let x = seed;
  return (n: number) => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return Math.floor((x / 2 ** 31) * n);
  };
}

describe('ReplayCache eviction', () => {
  it('keeps exactly what a least-recently-used list keeps, over many sets, gets and clears', () => {
    for (const seed of [1, 7, 42]) {
      const random = lcg(seed);
      const limit = 5;
      const cache = new ReplayCache({ maxEntries: limit, maxBytes: 1_000_000, ttlSeconds: 60 });
      let model: string[] = []; // least recently used first
      let clears = 0;
      for (let step = 0; step < 20_000; step++) {
        const key = `k${random(12)}`;
        const op = random(100);
        if (op < 55) {
          put(cache, key);
          model = [...model.filter((k) => k !== key), key].slice(-limit);
        } else if (op < 99) {
          const hit = cache.get(key, 'h') !== undefined;
          expect([step, key, hit]).toEqual([step, key, model.includes(key)]);
          if (hit) model = [...model.filter((k) => k !== key), key];
        } else {
          cache.clear();
          model = [];
          clears++;
        }
      }
      expect(clears).toBeGreaterThan(100);
      const kept = Array.from({ length: 12 }, (_, i) => `k${i}`).filter((k) => model.includes(k));
      expect(kept.every((k) => cache.get(k, 'h') !== undefined)).toBe(true);
    }
  });

  it('evicts the oldest entries until a large one fits the byte limit, and keeps evicting after', () => {
    const cache = new ReplayCache({ maxEntries: 100, maxBytes: 2_000, ttlSeconds: 60 });
    for (const k of ['a', 'b', 'c', 'd']) put(cache, k, 100); // 356 bytes each with overhead
    put(cache, 'big', 1_000);
    expect(['a', 'b', 'c', 'd', 'big'].filter((k) => cache.get(k, 'h'))).toEqual(['c', 'd', 'big']);
    put(cache, 'e', 400);
    expect(['c', 'd', 'big', 'e'].filter((k) => cache.get(k, 'h'))).toEqual(['big', 'e']);
  });

  it('gives back the bytes of entries that expired, so they do not push out live ones', async () => {
    const cache = new ReplayCache({ maxEntries: 100, maxBytes: 800, ttlSeconds: 60 });
    put(cache, 'x', 100, 1.01); // kept 10 ms: entries die a second before their record
    put(cache, 'y', 100, 1.01);
    await new Promise((r) => setTimeout(r, 30));
    expect([cache.get('x', 'h'), cache.get('y', 'h')]).toEqual([undefined, undefined]);
    put(cache, 'a', 100);
    put(cache, 'b', 100);
    expect(['a', 'b'].filter((k) => cache.get(k, 'h'))).toEqual(['a', 'b']);
  });

  it('after an entry expired and was stored again, counts it once', async () => {
    const cache = new ReplayCache({ maxEntries: 100, maxBytes: 712, ttlSeconds: 60 });
    put(cache, 'x', 100, 1.01);
    await new Promise((r) => setTimeout(r, 30));
    expect(cache.get('x', 'h')).toBeUndefined();
    put(cache, 'x', 100);
    put(cache, 'y', 100); // 356 bytes each: exactly the limit
    expect(['x', 'y'].filter((k) => cache.get(k, 'h'))).toEqual(['x', 'y']);
  });

  it('starts over after clear(): its limits count only what was stored since', () => {
    const cache = new ReplayCache({ maxEntries: 2, maxBytes: 712, ttlSeconds: 60 });
    for (const k of ['a', 'b']) put(cache, k, 100);
    cache.clear();
    expect(['a', 'b'].filter((k) => cache.get(k, 'h'))).toEqual([]);
    for (const k of ['c', 'd', 'e']) put(cache, k, 100);
    expect(['c', 'd', 'e'].filter((k) => cache.get(k, 'h'))).toEqual(['d', 'e']);
    put(cache, 'f', 100);
    expect(['d', 'e', 'f'].filter((k) => cache.get(k, 'h'))).toEqual(['e', 'f']);
  });
});
