/**
 * `npm run bench:instructions`: user-space instructions per request of each variant's server,
 * counted by callgrind. Unlike req/s on a shared 2-core box, the count repeats within ~1% run to
 * run, so it shows what the library's own code costs next to a hand-written floor. It leaves out
 * the kernel (socket syscalls), PostgreSQL and the load generator: compare it with `npm run bench`,
 * not instead of it. Needs valgrind.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ALL_VARIANTS, type VariantName } from './config.js';
import { BenchDatabase } from './database.js';
import { keyedLoad } from './keyed-load.js';

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2)
  args.set(process.argv[i].replace(/^--/, ''), process.argv[i + 1]);
const variants = (args.get('variants') ?? 'raw-single,module-single').split(',') as VariantName[];
for (const v of variants) if (!ALL_VARIANTS.includes(v)) throw new Error(`Unknown variant ${v}`);
const scenario = args.get('scenario') ?? 'first';
if (scenario !== 'first' && scenario !== 'replay') throw new Error('--scenario first|replay');
const requests = Number(args.get('requests') ?? 400);
const warmup = Number(args.get('warmup') ?? 3000);
/**
 * Counted windows per variant, back to back; their mean is reported, with their span. One
 * window may catch a major GC or an optimizing compile (callgrind counts V8's helper threads
 * too): single 400-request counts of module-single moved by up to 18% between runs.
 */
const windows = Number(args.get('windows') ?? 5);
/** `--keep DIR`: leave the callgrind dumps there, for `callgrind_annotate` (GC, timers, crypto by C++ symbol). */
const keep = args.get('keep');

const load = (url: string, amount: number, variant: VariantName) =>
  keyedLoad(url, { scenario, prefix: `instr-${variant}`, amount });

/** Instructions per request of `variant` in each of `windows` windows of `requests`, after `warmup` uninstrumented. */
async function count(variant: VariantName, db: BenchDatabase, dir: string): Promise<number[]> {
  const out = path.join(dir, `${variant}.out`);
  const file = fileURLToPath(new URL(`./variants/${variant}.js`, import.meta.url));
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--smc-check=all-non-file',
      '--instr-atstart=no',
      `--callgrind-out-file=${out}`,
      process.execPath,
      file,
    ],
    {
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        BENCH_POOL_SIZE: '10',
        REDIS_URL: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
        BENCH_REDIS_PREFIX: `${db.name}-peer`,
      },
      stdio: ['ignore', 'inherit', 'ignore', 'ipc'],
    },
  );
  try {
    const port = await new Promise<number>((resolve, reject) => {
      child.on('message', (msg: { type?: string; port?: number }) => {
        if (msg?.type === 'ready' && msg.port) resolve(msg.port);
      });
      child.once('exit', (code) => reject(new Error(`${variant} exited during start (${code})`)));
    });
    const url = `http://127.0.0.1:${port}`;
    await load(url, warmup, variant);
    const control = (...flags: string[]) =>
      execFileSync('callgrind_control', [...flags, String(child.pid)], { stdio: 'ignore' });
    const perWindow: number[] = [];
    for (let w = 0; w < windows; w++) {
      control('-i', 'on');
      const result = await load(url, requests, variant);
      control('-i', 'off');
      // A dump resets the counters: each dump is one window.
      control('-d');
      if (result['2xx'] !== requests)
        throw new Error(`${variant}: ${result.non2xx} of ${requests} answers were not 2xx`);
      const dumpNumber = (f: string) => Number(f.slice(f.lastIndexOf('.') + 1));
      const dumps = (await readdir(dir)).filter((f) => f.startsWith(`${variant}.out.`));
      const newest = dumps.sort((a, b) => dumpNumber(a) - dumpNumber(b)).at(-1) as string;
      const totals = /^totals: (\d+)/m.exec(await readFile(path.join(dir, newest), 'utf8'));
      if (!totals) throw new Error(`${variant}: no totals in the callgrind dump`);
      perWindow.push(Number(totals[1]) / requests);
    }
    return perWindow;
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) =>
      child.exitCode === null ? child.once('exit', resolve) : resolve(null),
    );
  }
}

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const dir = keep
  ? await mkdir(keep, { recursive: true }).then(() => keep)
  : await mkdtemp(path.join(os.tmpdir(), 'bench-instructions-'));
try {
  console.log(
    `callgrind: ${scenario}, ${warmup} warm-up + ${windows} windows × ${requests} counted requests per variant (their mean)`,
  );
  const counts: [VariantName, number][] = [];
  const m = (n: number) => (n / 1e6).toFixed(2);
  for (const variant of variants) {
    const perWindow = (await count(variant, db, dir)).sort((a, b) => a - b);
    // All counted requests together: a major GC every few hundred requests is part of the cost.
    const perRequest = perWindow.reduce((a, b) => a + b, 0) / perWindow.length;
    counts.push([variant, perRequest]);
    const ratio =
      counts.length > 1 ? `  ×${(perRequest / counts[0][1]).toFixed(2)} ${counts[0][0]}` : '';
    const span = `(windows ${m(perWindow[0])}–${m(perWindow.at(-1) as number)})`;
    console.log(`${variant.padEnd(15)} ${m(perRequest)} M instructions/request ${span}${ratio}`);
  }
} finally {
  if (keep) console.log(`callgrind dumps kept in ${dir}`);
  else await rm(dir, { recursive: true, force: true });
  await db.drop();
}
