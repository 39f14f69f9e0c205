// Loaded into a bench server by `npm run bench:async` (--import): between two SIGUSR2 it counts
// the async resources the process creates, by type (async_hooks `init`: promises, timers, ticks,
// immediates), and writes the counts to BENCH_ASYNC_OUT. The counts do not depend on the
// machine's load: what a lever saves in promises or timers shows exactly. The hook itself slows
// the server; no timing is read here.
import fs from 'node:fs';
import { createHook } from 'node:async_hooks';

let counting = false;
const byType = {};
createHook({
  init(_id, type) {
    if (counting) byType[type] = (byType[type] ?? 0) + 1;
  },
}).enable();

process.on('SIGUSR2', () => {
  if (!counting) {
    counting = true;
    return;
  }
  counting = false;
  const out = process.env.BENCH_ASYNC_OUT;
  // Written aside, then renamed: the bench reads it as soon as it appears.
  fs.writeFileSync(`${out}.partial`, JSON.stringify(byType));
  fs.renameSync(`${out}.partial`, out);
});
