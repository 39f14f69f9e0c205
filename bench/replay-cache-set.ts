/**
 * `npm run bench:build && node dist-bench/bench/replay-cache-set.js`: what storing one completed
 * response in the replay cache costs once the cache is full (every first call evicts one entry),
 * at the default 10 000 entries and at 1 000, against the cache turned off. Time per `set`,
 * including the key, fingerprint and body a first call brings, and the GC their retention costs.
 */
import { createHash, randomUUID } from 'node:crypto';
import { ReplayCache } from '../lib/execution/replay-cache.js';

function perSet(maxEntries: number | false, sets = 200_000): number {
  const cache = new ReplayCache(
    maxEntries === false ? false : { maxEntries, maxBytes: 32 * 1024 * 1024, ttlSeconds: 60 },
  );
  const one = (i: number) => {
    const key = randomUUID();
    const body = Buffer.from(JSON.stringify({ id: i, amount: 100, status: 'captured' }));
    cache.set(
      ReplayCache.scopeKey('', 'POST /payments', key),
      {
        requestHash: createHash('sha256').update(key).digest('hex'),
        recordId: randomUUID(),
        expiresAt: new Date(),
        response: { statusCode: 201, headers: { 'content-type': 'application/json' }, body },
      },
      86_400,
    );
  };
  for (let i = 0; i < 50_000; i++) one(i); // fills the cache: from here on every set evicts
  const start = process.cpuUsage();
  for (let i = 0; i < sets; i++) one(i);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / sets;
}

for (const limit of [false, 10_000, 1_000] as const) {
  const label = limit === false ? 'replayCache: false' : `maxEntries ${limit}`;
  console.log(`${label.padEnd(20)} ${perSet(limit).toFixed(2)} µs CPU per first call's set`);
}
