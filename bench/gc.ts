/**
 * `npm run bench:gc -- --variants raw-sql,module [--scenario first|replay|nokey] [--requests 15000]
 * [--connections 8]`: the garbage collector's main-thread pauses per request, by kind, the server
 * process's CPU per request (all threads: V8's helper threads mark and scavenge in parallel), and
 * the bytes per request that scavenges found alive (copied) and moved to the old generation
 * (promoted), counted in the server after the warm-up. Shows what retained or promoted objects
 * (requests in flight across an await, the replay cache) cost beyond what `bench:allocations`
 * counts as allocated; more connections mean more requests in flight at each scavenge.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { VariantName } from './config.js';
import { toolArgs } from './tool-args.js';
import { BenchDatabase } from './database.js';
import { countInServer } from './signalled-window.js';

const { variants, scenario, n } = toolArgs('raw-sql,module', {
  requests: 15000,
  warmup: 3000,
  connections: 8,
});
const { requests, warmup, connections } = n;

interface Counted {
  pauses: Record<string, { count: number; ms: number }>;
  cpuUs: number;
  survivedBytes: number;
  promotedBytes: number;
}
const preload = fileURLToPath(new URL('./gc-observer.preload.mjs', import.meta.url));

async function measure(variant: VariantName, db: BenchDatabase, dir: string): Promise<Counted> {
  const out = path.join(dir, `${variant}.json`);
  const written = await countInServer(variant, db, {
    preload,
    outVariable: 'BENCH_GC_OUT',
    out,
    scenario,
    warmup,
    requests,
    connections,
  });
  return JSON.parse(written) as Counted;
}

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-gc-'));
try {
  console.log(
    `${scenario}, ${connections} connections: ${warmup} warm-up, then ${requests} counted requests per variant`,
  );
  for (const variant of variants) {
    const { pauses, cpuUs, survivedBytes, promotedBytes } = await measure(variant, db, dir);
    const kb = (bytes: number) => (bytes / requests / 1024).toFixed(2);
    const perRequest = (ms: number) => ((ms * 1000) / requests).toFixed(1);
    const kinds = Object.entries(pauses)
      .map(([kind, p]) => `${kind} ${p.count}× ${perRequest(p.ms)}`)
      .join(', ');
    console.log(
      `${variant.padEnd(15)} process CPU ${(cpuUs / requests).toFixed(0)} µs/request; ` +
        `GC pauses µs/request: ${kinds}; scavenges kept ${kb(survivedBytes)} KB/request, ` +
        `promoted ${kb(promotedBytes)} KB/request`,
    );
  }
} finally {
  await rm(dir, { recursive: true, force: true });
  await db.drop();
}
