/**
 * `npm run bench:pair -- --variants module-single,raw-single [--scenario first|replay|nokey]
 * [--seconds 5] [--rounds 7] [--connections 16]`: the two variants loaded at the same time, each
 * by its own autocannon with the same number of connections, round after round (the start order
 * alternates). `npm run bench` runs its cells one after another, so whatever else the 2 cores do
 * in one cell and not in another lands in a ratio; two servers loaded together share every such
 * moment. It is not the figure the targets are stated in: both servers are saturated and split
 * the cores, and PostgreSQL serves both pools at once. With `--orders both` (the default) the
 * second half of the rounds runs with the servers restarted in swapped positions: the tool run
 * against itself reads 0.97 one way (its first server slower), so one position alone biases a
 * ratio by ~3%. Prints the geometric mean of a/b over the rounds with its 95% bootstrap interval.
 * Writes bench/results/pair-<time>.json.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import type autocannon from 'autocannon';
import { BenchDatabase } from './database.js';
import { keyedLoad, replayKeys } from './keyed-load.js';
import { ratioInterval } from './ratio-interval.js';
import { median } from './report.js';
import { completeKeys } from './scenarios.js';
import { cleanUpOnce, startVariant, type VariantServer } from './servers.js';
import { toolArgs } from './tool-args.js';

const { variants, scenario, n, args } = toolArgs(
  'module-single,raw-single',
  { seconds: 5, rounds: 7, connections: 16 },
  ['orders'],
);
const orders = args.get('orders') ?? 'both';
if (orders !== 'both' && orders !== 'one') throw new Error('--orders both|one');
if (variants.length !== 2)
  throw new Error('--variants a,b: exactly two (a,a runs the tool against itself)');
const { seconds, rounds, connections } = n;
const startedAt = new Date();

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const servers: VariantServer[] = [];
const cleanUp = cleanUpOnce(servers, db);

// Per half and position, so `a,a` does not replay one set of records from two servers.
const prefix = (half: number, slot: number) => `pair-${half}-${slot}-${variants[slot]}`;
const rps = (r: autocannon.Result) => r['2xx'] / r.duration;

interface Round {
  round: number;
  /** In the order of `--variants`, whichever position each server had. */
  rps: [number, number];
  ratio: number;
  /** The second half of `--orders both`: b's server was started first. */
  swapped: boolean;
}
const results: Round[] = [];
const [a, b] = variants;
const halves = orders === 'both' && rounds > 1 ? [false, true] : [false];
try {
  console.log(
    `${scenario}: ${rounds} rounds × ${seconds} s, ${a} and ${b} loaded together, ${connections} connections each` +
      (halves.length === 2 ? ', positions swapped for the second half' : ''),
  );
  for (const [half, swapped] of halves.entries()) {
    // servers[position] serves variants[slots[position]].
    const slots = swapped ? [1, 0] : [0, 1];
    for (const slot of slots) {
      servers.push(
        await startVariant(variants[slot], {
          DATABASE_URL: db.url,
          BENCH_POOL_SIZE: '10',
          BENCH_REDIS_PREFIX: `${db.name}-peer`,
          REDIS_URL: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
        }),
      );
    }
    const load = (position: number, duration: number) =>
      keyedLoad(servers[position].url, {
        scenario,
        prefix: prefix(half, slots[position]),
        connections,
        duration,
      });
    // Each server apart first: its JIT settles, and a replay's keys are all completed.
    for (const [position, server] of servers.entries()) {
      if (scenario === 'replay')
        await completeKeys(server.url, replayKeys(prefix(half, slots[position])));
      await load(position, 3);
    }
    const share = half === 0 ? Math.ceil(rounds / halves.length) : rounds - results.length;
    for (let i = 0; i < share; i++) {
      const round = results.length + 1;
      const startOrder = round % 2 === 1 ? [0, 1] : [1, 0];
      const byStart = await Promise.all(startOrder.map((position) => load(position, seconds)));
      const byPosition = round % 2 === 1 ? byStart : [byStart[1], byStart[0]];
      const [ra, rb] = swapped ? [byPosition[1], byPosition[0]] : byPosition;
      // autocannon's `errors` include its timeouts.
      const failed = [ra, rb].reduce((sum, r) => sum + r.non2xx + r.errors, 0);
      if (failed > 0) throw new Error(`round ${round}: ${failed} responses were not 2xx or failed`);
      const pair: Round = { round, rps: [rps(ra), rps(rb)], ratio: rps(ra) / rps(rb), swapped };
      results.push(pair);
      console.log(
        `  round ${round}${swapped ? ' (swapped)' : ''}: ${a} ${pair.rps[0].toFixed(0)} req/s, ${b} ${pair.rps[1].toFixed(0)} req/s, ratio ${pair.ratio.toFixed(3)}`,
      );
    }
    // Requests cut off by the load's stop still finish their completion before the pools end.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await Promise.all(servers.splice(0).map((s) => s.stop()));
  }
  const ratios = results.map((r) => r.ratio);
  const { mean, low, high } = ratioInterval(ratios);
  const byHalf = halves.map((swapped) =>
    median(results.filter((r) => r.swapped === swapped).map((r) => r.ratio)).toFixed(3),
  );
  console.log(
    `\n${a} / ${b}, ${scenario}, loaded together: geometric mean ${mean.toFixed(3)} ` +
      `(95% interval ${low.toFixed(3)}–${high.toFixed(3)}); median ratio ${median(ratios).toFixed(3)} ` +
      `(rounds ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}` +
      (halves.length === 2 ? `; medians ${byHalf[0]} as given, ${byHalf[1]} swapped` : '') +
      `); median req/s ${median(results.map((r) => r.rps[0])).toFixed(0)} and ${median(results.map((r) => r.rps[1])).toFixed(0)}`,
  );
  const dir = new URL('../../bench/results/', import.meta.url);
  await mkdir(dir, { recursive: true });
  const file = new URL(`pair-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`, dir);
  const settings = { variants, scenario, seconds, rounds, connections, orders };
  await writeFile(file, JSON.stringify({ startedAt, settings, results }, null, 2) + '\n');
  console.log(`results: ${file.pathname}`);
} finally {
  if (servers.length > 0) await new Promise((resolve) => setTimeout(resolve, 1000));
  await cleanUp();
}
