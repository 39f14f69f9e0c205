/**
 * `npm run bench:pair -- --variants module-single,raw-single [--scenario first|replay|nokey]
 * [--seconds 5] [--rounds 7] [--connections 16]`: the two variants loaded at the same time, each
 * by its own autocannon with the same number of connections, round after round (the start order
 * alternates). `npm run bench` runs its cells one after another, so whatever else the 2 cores do
 * in one cell and not in another lands in a ratio; two servers loaded together share every such
 * moment. It is not the figure the targets are stated in: both servers are saturated and split
 * the cores, and PostgreSQL serves both pools at once. Writes bench/results/pair-<time>.json.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import type autocannon from 'autocannon';
import { BenchDatabase } from './database.js';
import { keyedLoad, replayKeys } from './keyed-load.js';
import { median } from './report.js';
import { completeKeys } from './scenarios.js';
import { cleanUpOnce, startVariant, type VariantServer } from './servers.js';
import { toolArgs } from './tool-args.js';

const { variants, scenario, n } = toolArgs('module-single,raw-single', {
  seconds: 5,
  rounds: 7,
  connections: 16,
});
if (variants.length !== 2)
  throw new Error('--variants a,b: exactly two (a,a runs the tool against itself)');
const { seconds, rounds, connections } = n;
const startedAt = new Date();

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const servers: VariantServer[] = [];
const cleanUp = cleanUpOnce(servers, db);

// Per position, so `a,a` does not replay one set of records from two servers.
const prefix = (index: number) => `pair-${index}-${variants[index]}`;
const load = (index: number, duration: number) =>
  keyedLoad(servers[index].url, { scenario, prefix: prefix(index), connections, duration });
const rps = (r: autocannon.Result) => r['2xx'] / r.duration;

interface Round {
  round: number;
  rps: [number, number];
  ratio: number;
}
const results: Round[] = [];
try {
  for (const name of variants) {
    servers.push(
      await startVariant(name, {
        DATABASE_URL: db.url,
        BENCH_POOL_SIZE: '10',
        BENCH_REDIS_PREFIX: `${db.name}-peer`,
        REDIS_URL: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
      }),
    );
  }
  // Each server apart first: its JIT settles, and a replay's keys are all completed.
  for (const [index, server] of servers.entries()) {
    if (scenario === 'replay') await completeKeys(server.url, replayKeys(prefix(index)));
    await load(index, 3);
  }
  const [a, b] = variants;
  console.log(
    `${scenario}: ${rounds} rounds × ${seconds} s, ${a} and ${b} loaded together, ${connections} connections each`,
  );
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? [0, 1] : [1, 0];
    const loads = order.map((index) => load(index, seconds));
    const [first, second] = await Promise.all(loads);
    const [ra, rb] = round % 2 === 1 ? [first, second] : [second, first];
    // autocannon's `errors` include its timeouts.
    const failed = [ra, rb].reduce((sum, r) => sum + r.non2xx + r.errors, 0);
    if (failed > 0) throw new Error(`round ${round}: ${failed} responses were not 2xx or failed`);
    const pair: Round = { round, rps: [rps(ra), rps(rb)], ratio: rps(ra) / rps(rb) };
    results.push(pair);
    console.log(
      `  round ${round}: ${a} ${pair.rps[0].toFixed(0)} req/s, ${b} ${pair.rps[1].toFixed(0)} req/s, ratio ${pair.ratio.toFixed(3)}`,
    );
  }
  const ratios = results.map((r) => r.ratio);
  console.log(
    `\n${a} / ${b}, ${scenario}, loaded together: median ratio ${median(ratios).toFixed(3)} ` +
      `(rounds ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}); ` +
      `median req/s ${median(results.map((r) => r.rps[0])).toFixed(0)} and ${median(results.map((r) => r.rps[1])).toFixed(0)}`,
  );
  const dir = new URL('../../bench/results/', import.meta.url);
  await mkdir(dir, { recursive: true });
  const file = new URL(`pair-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`, dir);
  const settings = { variants, scenario, seconds, rounds, connections };
  await writeFile(file, JSON.stringify({ startedAt, settings, results }, null, 2) + '\n');
  console.log(`results: ${file.pathname}`);
} finally {
  // Requests cut off by the load's stop still finish their completion before the pools end.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await cleanUp();
}
