/**
 * `npm run bench:profile -- --variant module-single [--scenario first|replay] [--seconds 15]`:
 * where a variant's server spends its CPU under load. callgrind counts instructions but cannot
 * name JIT'd JavaScript; V8's sampling profiler can. The server runs with `--cpu-prof`; only the
 * samples taken during the measured load count (warm-up and start-up are left out). Each sample
 * is charged to the innermost lib/ frame on its stack, so time spent in Node, pg or rxjs on
 * behalf of a lib function shows under that function.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ALL_VARIANTS, type VariantName } from './config.js';
import { BenchDatabase } from './database.js';
import { keyedLoad } from './keyed-load.js';
import { startVariant } from './servers.js';

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2)
  args.set(process.argv[i].replace(/^--/, ''), process.argv[i + 1]);
const variant = (args.get('variant') ?? 'module-single') as VariantName;
if (!ALL_VARIANTS.includes(variant)) throw new Error(`Unknown variant ${variant}`);
const scenario = args.get('scenario') ?? 'first';
if (scenario !== 'first' && scenario !== 'replay') throw new Error('--scenario first|replay');
const seconds = Number(args.get('seconds') ?? 15);
const top = Number(args.get('top') ?? 40);

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

const load = (url: string, duration: number) =>
  keyedLoad(url, { scenario, prefix: `prof-${variant}`, duration });

const OURS = '/dist-bench/lib/';
const ours = (url: string) => url.includes(OURS);
const short = (url: string) =>
  ours(url)
    ? `lib/${url.split(OURS).at(-1)}`
    : url.includes('node_modules/')
      ? url.split('node_modules/').at(-1)?.split('/')[0] + ' (dep)'
      : url.startsWith('node:')
        ? 'node internals'
        : url.includes('/bench/')
          ? 'bench'
          : url || 'native/gc/idle';

function summarize(profile: Profile, from: number, to: number): void {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfByPlace = new Map<string, number>();
  const chargedToLib = new Map<string, number>();
  const chargedFile = new Map<string, number>();
  let t = profile.startTime;
  let total = 0;
  let idle = 0;
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i];
    if (t < from || t > to) return;
    total++;
    const node = byId.get(id) as ProfileNode;
    const f = node.callFrame;
    if (f.functionName === '(idle)') {
      idle++;
      return;
    }
    const place = `${short(f.url)} ${f.functionName || '(anon)'}:${f.lineNumber + 1}`;
    selfByPlace.set(place, (selfByPlace.get(place) ?? 0) + 1);
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const cf = (byId.get(cur) as ProfileNode).callFrame;
      if (ours(cf.url)) {
        const name = `${short(cf.url)} ${cf.functionName || '(anon)'}:${cf.lineNumber + 1}`;
        chargedToLib.set(name, (chargedToLib.get(name) ?? 0) + 1);
        chargedFile.set(short(cf.url), (chargedFile.get(short(cf.url)) ?? 0) + 1);
        break;
      }
    }
  });
  const busy = total - idle;
  const pct = (n: number) => `${((100 * n) / busy).toFixed(1).padStart(5)}%`;
  const print = (title: string, m: Map<string, number>, n = top) => {
    console.log(`\n${title}`);
    for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n))
      console.log(`${pct(v)} ${k}`);
  };
  const libTotal = [...chargedFile.values()].reduce((a, b) => a + b, 0);
  console.log(`${busy} busy samples (${idle} idle); charged to lib/: ${pct(libTotal)}`);
  print('lib/ files (self + what they call outside lib/)', chargedFile);
  print('lib/ functions (self + what they call outside lib/)', chargedToLib);
  print('self time by function', selfByPlace);
}

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-profile-'));
process.env.BENCH_VARIANT_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${dir} --cpu-prof-interval=${args.get('interval') ?? 200}`;
try {
  const server = await startVariant(variant, {
    DATABASE_URL: db.url,
    BENCH_POOL_SIZE: '10',
    REDIS_URL: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
  });
  try {
    await load(server.url, 3);
    const from = Number(process.hrtime.bigint() / 1000n);
    const result = await load(server.url, seconds);
    const to = Number(process.hrtime.bigint() / 1000n);
    console.log(
      `${variant} ${scenario}: ${result.requests.average} req/s, ${result['2xx']} 2xx, ${result.non2xx} other`,
    );
    await server.stop();
    const file = (await readdir(dir)).find((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error('the server wrote no .cpuprofile');
    summarize(JSON.parse(await readFile(path.join(dir, file), 'utf8')) as Profile, from, to);
  } finally {
    await server.stop();
  }
} finally {
  if (!args.has('keep')) await rm(dir, { recursive: true, force: true });
  else console.log(`profile kept in ${dir}`);
  await db.drop();
}
