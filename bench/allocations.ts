/**
 * `npm run bench:allocations -- --variants raw-single,module-single [--scenario first|replay|nokey]
 * [--connections 8] [--live on]`: bytes allocated per request by each variant's server, by
 * allocating function. V8's sampling heap profiler runs in the server (started over the inspector
 * after the warm-up) and keeps the samples of objects the GC already collected, so this is what
 * the request allocates, not what survives. Steadier than `bench:instructions` (whose windows move
 * with each major GC): it shows a lever that only removes allocations, i.e. garbage-collector work.
 * With `--live on`, only objects not yet collected are kept and profiles are taken every 500 ms
 * under load: bytes live per connection, by allocating function (what requests in flight hold
 * across their awaits, and what scavenges promoted that waits for a major collection).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { VariantName } from './config.js';
import { toolArgs } from './tool-args.js';
import { BenchDatabase } from './database.js';
import { countInServer } from './signalled-window.js';

const { variants, scenario, n, args } = toolArgs(
  'raw-single,module-single',
  { requests: 3000, warmup: 3000, top: 15, connections: 8 },
  ['live', 'survivors'],
);
const { requests, warmup, top, connections } = n;
const live = args.get('live') === 'on';
if (live) process.env.BENCH_HEAP_LIVE = '1';
const survivors = args.get('survivors') === 'on';
if (survivors) process.env.BENCH_HEAP_SURVIVORS = '1';

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

interface HeapProfile {
  head: HeapNode;
  /** With `--live on`: how many profiles `head` gathers. */
  snapshots?: number;
}

const preload = fileURLToPath(new URL('./heap-sampling.preload.mjs', import.meta.url));

function bytesByPlace(root: HeapNode): Map<string, number> {
  const places = new Map<string, number>();
  const stack = [root];
  while (stack.length > 0) {
    const node = stack.pop() as HeapNode;
    const { functionName, url, lineNumber } = node.callFrame;
    const file = url.replace(/.*node_modules\//, '').replace(/.*dist-bench\//, '');
    const place = `${file} ${functionName || '(anon)'}:${lineNumber + 1}`;
    places.set(place, (places.get(place) ?? 0) + node.selfSize);
    stack.push(...node.children);
  }
  return places;
}

async function measure(variant: VariantName, db: BenchDatabase, dir: string) {
  const out = path.join(dir, `${variant}.heapprofile`);
  const written = await countInServer(variant, db, {
    preload,
    outVariable: 'BENCH_HEAP_PROFILE',
    out,
    scenario,
    warmup,
    requests,
    connections,
  });
  const profile = JSON.parse(written) as HeapProfile;
  if (live && !profile.snapshots) throw new Error(`${variant}: no profile taken under load`);
  return {
    places: bytesByPlace(profile.head),
    per: live ? (profile.snapshots ?? 0) * connections : requests,
  };
}

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-allocations-'));
try {
  console.log(
    `${scenario}, ${connections} connections: ${warmup} warm-up, then ${requests} sampled requests per variant`,
  );
  for (const variant of variants) {
    const { places, per } = await measure(variant, db, dir);
    const perRequest = (n: number) => `${(n / per / 1024).toFixed(1).padStart(6)} KB`;
    const total = [...places.values()].reduce((a, b) => a + b, 0);
    const what = live
      ? 'live per connection under load'
      : survivors
        ? 'per request outlived a scavenge'
        : 'allocated per request';
    console.log(`\n${variant}: ${perRequest(total)} ${what}`);
    const sorted = [...places].sort((a, b) => b[1] - a[1]);
    for (const [place, bytes] of sorted.slice(0, top))
      console.log(`${perRequest(bytes)}  ${place}`);
    const lib = sorted.filter(([place]) => place.startsWith('lib/'));
    const libTotal = lib.reduce((a, [, b]) => a + b, 0);
    console.log(`${perRequest(libTotal)}  in lib/ functions (${lib.length} places)`);
  }
} finally {
  await rm(dir, { recursive: true, force: true });
  await db.drop();
}
