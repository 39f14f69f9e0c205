// Loaded into a bench server by `npm run bench:gc` (--import): the first SIGUSR2 starts counting
// the garbage collector's pauses (PerformanceObserver 'gc') and the process's CPU, the second
// writes them to BENCH_GC_OUT.
import fs from 'node:fs';
import { PerformanceObserver, constants } from 'node:perf_hooks';

const KINDS = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'scavenge',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'mark-compact',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental marking',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
};
let pauses;
let cpu;
const observer = new PerformanceObserver((list) => {
  if (!pauses) return;
  for (const entry of list.getEntries()) {
    const kind = KINDS[entry.detail?.kind] ?? 'other';
    const p = (pauses[kind] ??= { count: 0, ms: 0 });
    p.count++;
    p.ms += entry.duration;
  }
});
observer.observe({ entryTypes: ['gc'] });
process.on('SIGUSR2', () => {
  if (!pauses) {
    pauses = {};
    cpu = process.cpuUsage();
    return;
  }
  const used = process.cpuUsage(cpu);
  const out = process.env.BENCH_GC_OUT;
  fs.writeFileSync(`${out}.partial`, JSON.stringify({ pauses, cpuUs: used.user + used.system }));
  fs.renameSync(`${out}.partial`, out);
});
