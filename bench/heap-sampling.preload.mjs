// Loaded into a bench server by `npm run bench:allocations` (--import): the first SIGUSR2 starts
// V8's sampling heap profiler, keeping samples of collected objects; the second writes the profile
// to BENCH_HEAP_PROFILE.
import fs from 'node:fs';
import inspector from 'node:inspector';

const session = new inspector.Session();
session.connect();
let sampling = false;
process.on('SIGUSR2', () => {
  if (!sampling) {
    sampling = true;
    session.post('HeapProfiler.startSampling', {
      samplingInterval: 256,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    return;
  }
  session.post('HeapProfiler.stopSampling', (err, result) => {
    if (err) throw err;
    const out = process.env.BENCH_HEAP_PROFILE;
    // Written aside, then renamed: the bench reads it as soon as it appears.
    fs.writeFileSync(`${out}.partial`, JSON.stringify(result.profile));
    fs.renameSync(`${out}.partial`, out);
  });
});
