// Loaded into a bench server by `npm run bench:allocations` (--import): the first SIGUSR2 starts
// V8's sampling heap profiler, the second writes to BENCH_HEAP_PROFILE. By default the profiler
// keeps the samples of collected objects (what the requests allocated). With BENCH_HEAP_LIVE=1 it
// keeps only objects not yet collected (sampled every 4 KiB: a profile of every live object is
// too big to take often), and a profile is taken every BENCH_HEAP_LIVE_MS while the load runs,
// summed by allocating function: what requests in flight hold, and what was promoted and awaits a
// major collection.
import fs from 'node:fs';
import inspector from 'node:inspector';
import { clearInterval, setInterval } from 'node:timers';

const session = new inspector.Session();
session.connect();
const live = process.env.BENCH_HEAP_LIVE === '1';
// Survivors: samples of objects a scavenge collected are dropped, so what is left outlived the
// young generation (promoted, then collected by a major GC or still alive): what scavenges copy.
const survivors = process.env.BENCH_HEAP_SURVIVORS === '1';
let sampling = false;
let timer;
let snapshots = 0;
/** Live mode: the profiles' nodes by call frame, their bytes summed over the snapshots. */
const summed = new Map();

function add(node) {
  const stack = [node];
  while (stack.length > 0) {
    const n = stack.pop();
    const { functionName, url, lineNumber } = n.callFrame;
    const id = `${url}\u0000${functionName}\u0000${lineNumber}`;
    const entry = summed.get(id) ?? { callFrame: n.callFrame, selfSize: 0, children: [] };
    entry.selfSize += n.selfSize;
    summed.set(id, entry);
    stack.push(...n.children);
  }
}

function write(profile) {
  const out = process.env.BENCH_HEAP_PROFILE;
  // Written aside, then renamed: the bench reads it as soon as it appears.
  fs.writeFileSync(`${out}.partial`, JSON.stringify(profile));
  fs.renameSync(`${out}.partial`, out);
}

process.on('SIGUSR2', () => {
  if (!sampling) {
    sampling = true;
    session.post('HeapProfiler.startSampling', {
      samplingInterval: live ? 4096 : 256,
      includeObjectsCollectedByMajorGC: !live,
      includeObjectsCollectedByMinorGC: !live && !survivors,
    });
    if (live) {
      timer = setInterval(
        () =>
          session.post('HeapProfiler.getSamplingProfile', (err, r) => {
            if (err) return;
            snapshots++;
            add(r.profile.head);
          }),
        Number(process.env.BENCH_HEAP_LIVE_MS ?? 500),
      );
    }
    return;
  }
  clearInterval(timer);
  session.post('HeapProfiler.stopSampling', (err, result) => {
    if (err) throw err;
    if (!live) return write(result.profile);
    const callFrame = { functionName: '(snapshots)', url: '', lineNumber: -1 };
    write({ head: { callFrame, selfSize: 0, children: [...summed.values()] }, snapshots });
  });
});
