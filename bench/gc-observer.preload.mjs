// Loaded into a bench server by `npm run bench:gc` (--import): the first SIGUSR2 starts V8's GC
// profiler and the process's CPU count, the second writes to BENCH_GC_OUT, per kind of collection,
// its count and main-thread time, and what the scavenges kept: the bytes left in the young
// generation after each (copied once more) and the bytes moved to the old one (promoted: marked
// later by the helper threads). Those are what requests in flight across an await cost the
// collector, which the allocated bytes (`bench:allocations`) do not show.
import fs from 'node:fs';
import v8 from 'node:v8';

const YOUNG = new Set(['new_space', 'new_large_object_space']);
const OLD = new Set(['old_space', 'large_object_space']);
const used = (stats, names) =>
  stats.heapSpaceStatistics
    .filter((s) => names.has(s.spaceName))
    .reduce((sum, s) => sum + s.spaceUsedSize, 0);

let profiler;
let cpu;
process.on('SIGUSR2', () => {
  if (!profiler) {
    profiler = new v8.GCProfiler();
    profiler.start();
    cpu = process.cpuUsage();
    return;
  }
  const spent = process.cpuUsage(cpu);
  const pauses = {};
  let survivedBytes = 0;
  let promotedBytes = 0;
  for (const gc of profiler.stop().statistics) {
    const p = (pauses[gc.gcType] ??= { count: 0, ms: 0 });
    p.count++;
    p.ms += gc.cost / 1000;
    if (gc.gcType !== 'Scavenge') continue;
    survivedBytes += used(gc.afterGC, YOUNG);
    promotedBytes += Math.max(0, used(gc.afterGC, OLD) - used(gc.beforeGC, OLD));
  }
  const out = process.env.BENCH_GC_OUT;
  const counted = { pauses, cpuUs: spent.user + spent.system, survivedBytes, promotedBytes };
  fs.writeFileSync(`${out}.partial`, JSON.stringify(counted));
  fs.renameSync(`${out}.partial`, out);
});
