// Loaded into a bench server by `npm run bench:async` (--import): between two SIGUSR2 it counts
// the async resources the process creates, by type (async_hooks `init`: promises, timers, ticks,
// immediates), and writes the counts to BENCH_ASYNC_OUT. The counts do not depend on the
// machine's load: what a lever saves in promises or timers shows exactly. The hook itself slows
// the server; no timing is read here.
import fs from 'node:fs';
import { createHook } from 'node:async_hooks';

let counting = false;
const byType = {};
// With BENCH_ASYNC_SITES set: promises and timers also by the first frame outside Node's own
// code and rxjs that created them (slow: a stack per resource; the counts stay exact).
const sites = process.env.BENCH_ASYNC_SITES ? {} : undefined;
const siteOf = () => {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 16;
  const stack = new Error().stack.split('\n').slice(3);
  Error.stackTraceLimit = limit;
  const frame = stack.find((l) => !/node:|async_hooks|rxjs/.test(l)) ?? stack[0] ?? '';
  return frame
    .trim()
    .replace(/^at /, '')
    .replace(/file:\/\/|\/[^ (]*\/(node_modules|dist-bench)\//g, '');
};
createHook({
  init(_id, type) {
    if (!counting) return;
    byType[type] = (byType[type] ?? 0) + 1;
    if (sites && (type === 'PROMISE' || type === 'Timeout')) {
      const key = `${type} ${siteOf()}`;
      sites[key] = (sites[key] ?? 0) + 1;
    }
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
  fs.writeFileSync(`${out}.partial`, JSON.stringify(sites ? { ...byType, sites } : byType));
  fs.renameSync(`${out}.partial`, out);
});
