/**
 * `npm run bench:profile -- --variants raw-sql,module [--scenario first|replay|nokey] [--seconds 15]`:
 * where each variant's server spends its main thread's CPU under load, in µs per request, side by
 * side. callgrind counts instructions but cannot name JIT'd JavaScript; V8's sampling profiler
 * can. Each server runs with `--cpu-prof`; only the samples taken during the measured load count
 * (warm-up and start-up are left out). Two views:
 * - self time by package (lib/ summed, each dependency, each Node module, native: GC, writev), so
 *   the difference to a floor shows where it is spent, in the library or on its behalf;
 * - each sample charged to the innermost lib/ frame on its stack (the library's parts, with what
 *   they call in pg, Node or rxjs; a floor's raw-*.js interceptor is charged the same way): the
 *   first-call budget, part by part, beside the floor's.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { VariantName } from './config.js';
import { toolArgs } from './tool-args.js';
import { BenchDatabase } from './database.js';
import { keyedLoad } from './keyed-load.js';
import { serverEnv, startVariant } from './servers.js';

const { args, variants, scenario, n } = toolArgs(
  'raw-single,module-single',
  { seconds: 15, top: 30, interval: 200, connections: 8 },
  ['keep'],
);
const { seconds, top, interval: intervalUs, connections } = n;

interface Frame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: Frame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}
/** One variant's measured window: samples per place, and the requests answered in it. */
interface Summary {
  requests: number;
  busy: number;
  byPackage: Map<string, number>;
  byLibFunction: Map<string, number>;
}

const OURS = '/dist-bench/lib/';
const ours = (url: string) => url.includes(OURS);
function packageOf(f: Frame): string {
  const url = f.url;
  if (ours(url)) return `lib/${url.split(OURS).at(-1)}`;
  if (url.includes('node_modules/')) {
    const [scope, name] = (url.split('node_modules/').at(-1) as string).split('/');
    return scope.startsWith('@') ? `${scope}/${name}` : scope;
  }
  if (url.startsWith('node:')) return url.replace('node:internal/', 'node:');
  if (url.includes('/bench/')) return 'bench (variant code)';
  return `native: ${f.functionName || '(anon)'}`;
}
/** The floors' hand-written interceptors: charged like lib/, so their parts compare with ours. */
const FLOOR = /\/dist-bench\/bench\/variants\/(raw-[a-z-]+\.js)$/;
const charged = (url: string) => ours(url) || FLOOR.test(url);
const partOf = (f: Frame) =>
  `${ours(f.url) ? `lib/${f.url.split(OURS).at(-1)}` : `bench/${FLOOR.exec(f.url)?.[1]}`} ${f.functionName || '(anon)'}:${f.lineNumber + 1}`;

function summarize(profile: Profile, from: number, to: number, requests: number): Summary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const add = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  const summary: Summary = { requests, busy: 0, byPackage: new Map(), byLibFunction: new Map() };
  let t = profile.startTime;
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i];
    if (t < from || t > to) return;
    const f = (byId.get(id) as ProfileNode).callFrame;
    if (f.functionName === '(idle)') return;
    summary.busy++;
    add(summary.byPackage, packageOf(f));
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const cf = (byId.get(cur) as ProfileNode).callFrame;
      if (charged(cf.url)) {
        add(summary.byLibFunction, partOf(cf));
        break;
      }
    }
  });
  return summary;
}

/** Samples per request as µs of main-thread CPU per request (the sampling interval's worth). */
const us = (s: Summary, samples = s.busy) => (samples * intervalUs) / s.requests;
const cell = (n: number) => n.toFixed(1).padStart(8);

function printSideBySide(summaries: [VariantName, Summary][]): void {
  const perRequest = (samples: (s: Summary) => number) =>
    summaries.map(([, s]) => us(s, samples(s)));
  const places = new Set(summaries.flatMap(([, s]) => [...s.byPackage.keys()]));
  const rows = [...places]
    .filter((p) => !p.startsWith('lib/'))
    .map((p) => ({ name: p, values: perRequest((s) => s.byPackage.get(p) ?? 0) }));
  rows.push({
    name: 'lib/ (self, all files)',
    values: perRequest((s) =>
      [...s.byPackage].reduce((a, [k, n]) => (k.startsWith('lib/') ? a + n : a), 0),
    ),
  });
  const delta = (values: number[]) => (values.at(-1) as number) - values[0];
  rows.sort((a, b) => Math.abs(delta(b.values)) - Math.abs(delta(a.values)));
  const names = summaries.map(([v]) => v.padStart(16)).join('');
  const compared = summaries.length > 1;
  console.log(
    `\nmain-thread CPU, µs per request, self time by package\n${''.padEnd(34)}${names}${compared ? '   last−first' : ''}`,
  );
  const total = { name: 'busy (all)', values: perRequest((s) => s.busy) };
  for (const { name, values } of [total, ...rows.slice(0, top)]) {
    const diff = compared ? cell(delta(values)) : '';
    console.log(
      `${name.slice(0, 33).padEnd(34)}${values.map((v) => cell(v).padStart(16)).join('')}   ${diff}`,
    );
  }
}

function printLibParts(variant: VariantName, s: Summary): void {
  const total = [...s.byLibFunction.values()].reduce((a, b) => a + b, 0);
  console.log(
    `\n${variant}: charged to the innermost lib/ (or raw-*.js floor) function, self + what it calls elsewhere, µs per request; all of them ${us(s, total).toFixed(1)}`,
  );
  for (const [k, v] of [...s.byLibFunction].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`${cell(us(s, v))}  ${k}`);
}

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const summaries: [VariantName, Summary][] = [];
try {
  for (const variant of variants) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-profile-'));
    const server = await startVariant(variant, serverEnv(db), undefined, [
      '--cpu-prof',
      `--cpu-prof-dir=${dir}`,
      `--cpu-prof-interval=${intervalUs}`,
    ]);
    try {
      const load = (duration: number) =>
        keyedLoad(server.url, { scenario, prefix: `prof-${variant}`, duration, connections });
      await load(3);
      const from = Number(process.hrtime.bigint() / 1000n);
      const result = await load(seconds);
      const to = Number(process.hrtime.bigint() / 1000n);
      console.log(
        `${variant} ${scenario}: ${result.requests.average} req/s, ${result['2xx']} 2xx, ${result.non2xx} other`,
      );
      await server.stop();
      const file = (await readdir(dir)).find((f) => f.endsWith('.cpuprofile'));
      if (!file) throw new Error('the server wrote no .cpuprofile');
      const profile = JSON.parse(await readFile(path.join(dir, file), 'utf8')) as Profile;
      summaries.push([variant, summarize(profile, from, to, result['2xx'] + result.non2xx)]);
    } finally {
      await server.stop();
      if (!args.has('keep')) await rm(dir, { recursive: true, force: true });
      else console.log(`profile kept in ${dir}`);
    }
  }
} finally {
  await db.drop();
}
printSideBySide(summaries);
for (const [variant, s] of summaries) if (s.byLibFunction.size > 0) printLibParts(variant, s);
