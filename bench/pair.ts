/**
 * `npm run bench:pair -- --variants module-single,raw-single [--scenario first|replay|nokey]
 * [--seconds 5] [--rounds 8] [--connections 16] [--orders both|one]`: the two variants loaded at
 * the same time, each by its own autocannon with the same number of connections, round after
 * round. `npm run bench` runs its cells one after another, so whatever else the 2 cores do in one
 * cell and not in another lands in a ratio; two servers loaded together share every such
 * moment. It is not the figure the targets are stated in: both servers are saturated and split
 * the cores, and PostgreSQL serves both pools at once. With `--orders both` (the default) the
 * second half of the rounds runs with the servers restarted in swapped positions (one run of the
 * tool against itself in one position read 0.966: a lean of a few %, not established), and in
 * each half the variants take turns starting first (rounds: a multiple of 4). Prints the geometric
 * mean of a/b with a 95% bootstrap interval over the run's rounds (`ratio-interval.ts`: each
 * half × start-order cell weighs the same). Beside it (Linux), the same mean and interval of the
 * Node CPU each server spent per answer, b's over a's (from /proc, all its threads): where the two
 * servers are not both CPU-bound, the one that asks more of the cores is given more of them and
 * the req/s ratio leans to 1. Writes bench/results/pair-<time>.json.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import type autocannon from 'autocannon';
import { perResponse, sampleCpu } from './cpu.js';
import { BenchDatabase } from './database.js';
import { keyedLoad, replayKeys } from './keyed-load.js';
import { cellMean, ratioInterval } from './ratio-interval.js';
import { median } from './report.js';
import { completeKeys } from './scenarios.js';
import { cleanUpOnce, serverEnv, startVariant, type VariantServer } from './servers.js';
import { toolArgs } from './tool-args.js';

const { variants, scenario, n, args } = toolArgs(
  'module-single,raw-single',
  { seconds: 5, rounds: 8, connections: 16 },
  ['orders'],
);
const orders = args.get('orders') ?? 'both';
if (orders !== 'both' && orders !== 'one') throw new Error('--orders both|one');
if (variants.length !== 2)
  throw new Error('--variants a,b: exactly two (a,a runs the tool against itself)');
const { seconds, connections } = n;
if (!Number.isInteger(n.rounds)) throw new Error('--rounds must be a whole number');
// Each variant's load starts first as often as the other's, in each position.
const unit = orders === 'both' ? 4 : 2;
const rounds = Math.ceil(n.rounds / unit) * unit;
if (rounds !== n.rounds) {
  console.log(
    `${rounds} rounds (${n.rounds} asked): --orders ${orders} takes a multiple of ${unit}`,
  );
}
const startedAt = new Date();

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const servers: VariantServer[] = [];
const cleanUp = cleanUpOnce(servers, db);

// Per half and position, so `a,a` does not replay one set of records from two servers.
const prefix = (half: number, variant: number) => `pair-${half}-${variant}-${variants[variant]}`;
const rps = (r: autocannon.Result) => r['2xx'] / r.duration;

interface Round {
  round: number;
  /** In the order of `--variants`, whichever position each server had. */
  rps: [number, number];
  ratio: number;
  /** Node CPU per 2xx answer, µs (utime + stime of the server's process, all its threads); null without /proc. */
  cpuUs: [number, number] | null;
  /** b's CPU per answer over a's: > 1 where a costs the cores less. */
  cpuRatio: number | null;
  /** The second half of `--orders both`: b's server was started first. */
  swapped: boolean;
  /** a's load was started before b's in this round. */
  aFirst: boolean;
}
const results: Round[] = [];
const [a, b] = variants;
const halves = orders === 'both' ? [false, true] : [false];
try {
  console.log(
    `${scenario}: ${rounds} rounds × ${seconds} s, ${a} and ${b} loaded together, ${connections} connections each` +
      (halves.length === 2 ? ', positions swapped for the second half' : ''),
  );
  for (const [half, swapped] of halves.entries()) {
    // servers[position] serves variants[slots[position]].
    const slots = swapped ? [1, 0] : [0, 1];
    for (const slot of slots) {
      servers.push(await startVariant(variants[slot], serverEnv(db)));
    }
    const load = (variant: number, duration: number) =>
      keyedLoad(servers[slots.indexOf(variant)].url, {
        scenario,
        prefix: prefix(half, variant),
        connections,
        duration,
      });
    // Each server apart first: its JIT settles, and a replay's keys are all completed.
    for (const [position, server] of servers.entries()) {
      if (scenario === 'replay')
        await completeKeys(server.url, replayKeys(prefix(half, slots[position])));
      await load(slots[position], 3);
    }
    for (let i = 0; i < rounds / halves.length; i++) {
      const round = results.length + 1;
      const aFirst = i % 2 === 0;
      const cpuOf = (variant: number) => sampleCpu(servers[slots.indexOf(variant)].pid, []);
      const cpuBefore = [cpuOf(0), cpuOf(1)];
      const [first, second] = await Promise.all(
        (aFirst ? [0, 1] : [1, 0]).map((variant) => load(variant, seconds)),
      );
      // As `npm run bench`'s cells: requests cut off by the stop finish inside the window.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const cpuAfter = [cpuOf(0), cpuOf(1)];
      const [ra, rb] = aFirst ? [first, second] : [second, first];
      // autocannon's `errors` include its timeouts.
      const failed = [ra, rb].reduce((sum, r) => sum + r.non2xx + r.errors, 0);
      if (failed > 0) throw new Error(`round ${round}: ${failed} responses were not 2xx or failed`);
      if (rps(ra) === 0 || rps(rb) === 0) throw new Error(`round ${round}: a server answered none`);
      const ratio = rps(ra) / rps(rb);
      const [ca, cb] = [ra, rb].map(
        (r, v) => perResponse(cpuBefore[v], cpuAfter[v], r['2xx']).server,
      );
      const cpuUs: [number, number] | null = ca && cb ? [ca, cb] : null;
      const cpuRatio = cpuUs && cpuUs[1] / cpuUs[0];
      results.push({ round, rps: [rps(ra), rps(rb)], ratio, cpuUs, cpuRatio, swapped, aFirst });
      console.log(
        `  round ${round}${swapped ? ' (swapped)' : ''}: ${a} ${rps(ra).toFixed(0)} req/s, ${b} ${rps(rb).toFixed(0)} req/s, ratio ${ratio.toFixed(3)}` +
          (cpuUs
            ? `; Node CPU per answer ${cpuUs[0].toFixed(0)} and ${cpuUs[1].toFixed(0)} µs`
            : ''),
      );
    }
    // Requests cut off by the load's stop still finish their completion before the pools end.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await Promise.all(servers.map((s) => s.stop()));
    servers.length = 0;
  }
  const ratios = results.map((r) => r.ratio);
  const cellsOf = (rows: Round[], of: (r: Round) => number = (r) => r.ratio) =>
    [false, true].flatMap((swapped) =>
      [true, false].map((aFirst) =>
        rows.filter((r) => r.swapped === swapped && r.aFirst === aFirst).map(of),
      ),
    );
  const summary = ratioInterval(cellsOf(results));
  const withCpu = results.every((r) => r.cpuRatio !== null);
  const cpuOfRound = (r: Round) => r.cpuRatio as number;
  const cpu = withCpu ? ratioInterval(cellsOf(results, cpuOfRound)) : null;
  const halfMeans = (of?: (r: Round) => number) =>
    halves.map((swapped) =>
      cellMean(
        cellsOf(
          results.filter((r) => r.swapped === swapped),
          of,
        ),
      ),
    );
  const byHalf = halfMeans();
  const halvesText = (means: number[]) =>
    halves.length === 2 ? `; ${means[0].toFixed(3)} as given, ${means[1].toFixed(3)} swapped` : '';
  // Below 8 rounds a bootstrap interval is mostly the resampling's own artefact.
  const intervalOf = (r: { low: number; high: number }) =>
    rounds >= 8
      ? `95% interval over this run's rounds ${r.low.toFixed(3)}–${r.high.toFixed(3)}`
      : 'too few rounds for an interval';
  console.log(
    `\n${a} / ${b}, ${scenario}, loaded together: geometric mean ${summary.mean.toFixed(3)} (${intervalOf(summary)}` +
      halvesText(byHalf) +
      `); median ratio ${median(ratios).toFixed(3)} ` +
      `(rounds ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}); ` +
      `median req/s ${median(results.map((r) => r.rps[0])).toFixed(0)} and ${median(results.map((r) => r.rps[1])).toFixed(0)}`,
  );
  if (cpu) {
    const cpuMedian = (v: number) => median(results.map((r) => (r.cpuUs as number[])[v]));
    console.log(
      `Node CPU per answer, ${b}'s over ${a}'s: geometric mean ${cpu.mean.toFixed(3)} (${intervalOf(cpu)}` +
        `${halvesText(halfMeans(cpuOfRound))}); median µs ${cpuMedian(1).toFixed(0)} (${b}) and ${cpuMedian(0).toFixed(0)} (${a})`,
    );
  }
  const dir = new URL('../../bench/results/', import.meta.url);
  await mkdir(dir, { recursive: true });
  const file = new URL(`pair-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`, dir);
  const settings = {
    variants,
    scenario,
    seconds,
    rounds,
    roundsAsked: n.rounds,
    connections,
    orders,
  };
  // summary: a's req/s over b's; cpuPerAnswerBOverA: b's Node CPU per answer over a's.
  const json = { startedAt, settings, summary, cpuPerAnswerBOverA: cpu, results };
  await writeFile(file, JSON.stringify(json, null, 2) + '\n');
  console.log(`results: ${file.pathname}`);
} finally {
  if (servers.length > 0) await new Promise((resolve) => setTimeout(resolve, 1000));
  await cleanUp();
}
