/**
 * `npm run bench:pair -- --variants module-single,raw-single [--scenario first|replay|nokey]
 * [--seconds 5] [--rounds 7] [--connections 16]`: the two variants loaded at the same time, each
 * by its own autocannon with the same number of connections, round after round. `npm run bench`
 * runs its cells one after another, so whatever else the 2 cores do in one cell and not in the
 * next (±25% between rounds of the same variant here) lands in the ratio; two servers loaded
 * together share every such moment and split the machine by what a request costs each of them.
 * The ratio of their req/s is therefore a steadier reading of the same question (how much does
 * the first variant cost next to the second), though not the same figure: each gets about half
 * the machine, and PostgreSQL serves both pools at once. Each round also runs the pair with the
 * two variants swapped in the load generators' start order.
 */
import type autocannon from 'autocannon';
import { BenchDatabase } from './database.js';
import { keyedLoad } from './keyed-load.js';
import { median } from './report.js';
import { startVariant, type VariantServer } from './servers.js';
import { toolArgs } from './tool-args.js';

const { args, variants, scenario } = toolArgs('module-single,raw-single');
if (variants.length !== 2) throw new Error('--variants a,b: exactly two');
const seconds = Number(args.get('seconds') ?? 5);
const rounds = Number(args.get('rounds') ?? 7);
const connections = Number(args.get('connections') ?? 16);

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const servers: VariantServer[] = [];
const load = (server: VariantServer, duration: number) =>
  keyedLoad(server.url, {
    scenario,
    prefix: `pair-${server.name}`,
    connections,
    duration,
  });
const rps = (r: autocannon.Result) => r['2xx'] / r.duration;

try {
  for (const name of variants) {
    servers.push(
      await startVariant(name, {
        DATABASE_URL: db.url,
        BENCH_POOL_SIZE: '10',
        REDIS_URL: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
      }),
    );
  }
  // Warm-up apart, so each JIT settles and a replay's keys are completed before the first round.
  for (const server of servers) await load(server, 3);
  const [a, b] = variants;
  console.log(
    `${scenario}: ${rounds} rounds × ${seconds} s, ${a} and ${b} loaded together, ${connections} connections each`,
  );
  const ratios: number[] = [];
  const totals = { a: [] as number[], b: [] as number[] };
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? servers : [...servers].reverse();
    const results = await Promise.all(order.map((s) => load(s, seconds)));
    const [ra, rb] = round % 2 === 1 ? results : [...results].reverse();
    const failed = results.reduce((n, r) => n + r.non2xx + r.errors + r.timeouts, 0);
    if (failed > 0) throw new Error(`round ${round}: ${failed} responses were not 2xx or failed`);
    ratios.push(rps(ra) / rps(rb));
    totals.a.push(rps(ra));
    totals.b.push(rps(rb));
    console.log(
      `  round ${round}: ${a} ${rps(ra).toFixed(0)} req/s, ${b} ${rps(rb).toFixed(0)} req/s, ratio ${(rps(ra) / rps(rb)).toFixed(3)}`,
    );
  }
  console.log(
    `\n${a} / ${b}, ${scenario}, loaded together: median ratio ${median(ratios).toFixed(3)} ` +
      `(rounds ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}); ` +
      `median req/s ${median(totals.a).toFixed(0)} and ${median(totals.b).toFixed(0)}`,
  );
} finally {
  // Requests cut off by the load's stop still finish their completion before the pools end.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await Promise.all(servers.map((s) => s.stop()));
  await db.drop();
}
