/**
 * `npm run bench:instructions`: user-space instructions per request of each variant's server,
 * counted by callgrind, the main thread's apart from all threads'. Unlike req/s on a shared 2-core
 * box, the main thread's count repeats within a few %, so it shows what the library's own code
 * costs next to a hand-written floor. It leaves out
 * the kernel (socket syscalls), PostgreSQL and the load generator: compare it with `npm run bench`,
 * not instead of it. Needs valgrind.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { VariantName } from './config.js';
import { toolArgs } from './tool-args.js';
import { BenchDatabase } from './database.js';
import { keyedLoad } from './keyed-load.js';
import { serverEnv } from './servers.js';

const { args, variants, scenario, n } = toolArgs(
  'raw-single,module-single',
  { requests: 400, warmup: 3000, windows: 5, connections: 8 },
  ['keep', 'cache-sim', 'branch-sim', 'gc-on-main'],
);
const { requests, warmup } = n;
/**
 * Counted windows per variant, back to back; their mean is reported, with their span. One
 * window may catch a major GC or an optimizing compile on V8's helper threads: their count moves
 * by up to ~35% between windows, the main thread's by ~3%.
 */
const windows = n.windows;
/** `--keep DIR`: leave the callgrind dumps there, for `callgrind_annotate` (GC, timers, crypto by C++ symbol). */
const keep = args.get('keep');
/**
 * `--cache-sim on`: callgrind also simulates the caches (first-level instruction and data, last
 * level) and the tool prints the main thread's misses per request and valgrind's cycle estimate
 * (Ir + 10 × L1 misses + 100 × LL misses): whether the same count of instructions costs more when
 * it touches more code and data. Slower, and a model of this machine's caches, not a measurement.
 */
const cacheSim = args.get('cache-sim') === 'on';
/**
 * `--branch-sim on`: callgrind also simulates branch prediction and the tool prints the main
 * thread's conditional and indirect branches per request and their mispredictions: whether the
 * library's instructions cost more than a loop's because they branch less predictably (many small
 * functions, polymorphic calls). A model of a simple predictor, not this machine's.
 */
const branchSim = args.get('branch-sim') === 'on';
/**
 * `--gc-on-main on`: the server runs with V8's `--single-threaded-gc`, so every collection's work
 * lands on the main thread. Without it, a scavenge's work is shared with V8's helper threads as
 * the scheduler happens to run them (under valgrind, one thread at a time), and the main thread's
 * count moves by the share it got: with it, the main thread counts the whole of the collector.
 */
const gcOnMain = args.get('gc-on-main') === 'on';

/** One counted window, per request: the main thread's instructions, and all threads'. */
interface Window {
  main: number;
  all: number;
  /** The main thread's events per request by name (Ir, I1mr, D1mr, Bcm, ...), with a simulation on. */
  events?: Record<string, number>;
}

const load = (url: string, amount: number, variant: VariantName) =>
  keyedLoad(url, { scenario, prefix: `instr-${variant}`, amount, connections: n.connections });

/** Instructions per request of `variant` in each of `windows` windows of `requests`, after `warmup` uninstrumented. */
async function count(variant: VariantName, db: BenchDatabase, dir: string): Promise<Window[]> {
  const out = path.join(dir, `${variant}.out`);
  const file = fileURLToPath(new URL(`./variants/${variant}.js`, import.meta.url));
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--smc-check=all-non-file',
      '--instr-atstart=no',
      // One dump per thread: the main thread's count leaves out V8's helper threads (concurrent
      // marking, background compiles), whose share of a window is what made windows differ.
      '--separate-threads=yes',
      ...(cacheSim ? ['--cache-sim=yes'] : []),
      ...(branchSim ? ['--branch-sim=yes'] : []),
      `--callgrind-out-file=${out}`,
      process.execPath,
      ...(gcOnMain ? ['--single-threaded-gc'] : []),
      file,
    ],
    {
      env: {
        ...process.env,
        ...serverEnv(db),
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
    const perWindow: Window[] = [];
    for (let w = 1; w <= windows; w++) {
      control('-i', 'on');
      const result = await load(url, requests, variant);
      control('-i', 'off');
      // A dump resets the counters: each dump is one window.
      control('-d');
      if (result['2xx'] !== requests)
        throw new Error(`${variant}: ${result.non2xx} of ${requests} answers were not 2xx`);
      // Window w is dump w, one file per thread: <variant>.out.<w>-<thread>, thread 01 the main one.
      const files = (await readdir(dir)).filter((f) => f.startsWith(`${variant}.out.${w}-`));
      const window: Window = { main: 0, all: 0 };
      for (const f of files) {
        const text = await readFile(path.join(dir, f), 'utf8');
        const totals = /^totals: ([\d ]+)/m.exec(text);
        if (!totals) throw new Error(`${variant}: no totals in the callgrind dump ${f}`);
        const values = totals[1].trim().split(' ').map(Number);
        window.all += values[0] / requests;
        if (!f.endsWith('-01')) continue;
        window.main += values[0] / requests;
        const names = /^events: (.+)$/m.exec(text)?.[1].trim().split(' ') ?? [];
        window.events = Object.fromEntries(
          names.map((name, i) => [name, (values[i] ?? 0) / requests]),
        );
      }
      if (window.main === 0) throw new Error(`${variant}: no main-thread dump for window ${w}`);
      perWindow.push(window);
    }
    return perWindow;
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) =>
      child.exitCode === null ? child.once('exit', resolve) : resolve(null),
    );
  }
}

/** The main thread's events of `name` per request, the mean of the windows. */
const eventMean = (perWindow: Window[], name: string) =>
  perWindow.reduce((sum, w) => sum + (w.events?.[name] ?? 0), 0) / perWindow.length;

/** The main thread's branches and mispredictions per request (means of the windows). */
function branchLine(perWindow: Window[]): string {
  const ev = (name: string) => eventMean(perWindow, name);
  const k = (n: number) => (n / 1e3).toFixed(1);
  const rate = (miss: number, all: number) => `${((100 * miss) / Math.max(all, 1)).toFixed(1)}%`;
  return `main thread per request: conditional branches ${k(ev('Bc'))} K, mispredicted ${k(ev('Bcm'))} K (${rate(ev('Bcm'), ev('Bc'))}); indirect ${k(ev('Bi'))} K, mispredicted ${k(ev('Bim'))} K (${rate(ev('Bim'), ev('Bi'))})`;
}

/** The main thread's misses per request (means of the windows) and valgrind's cycle estimate. */
function cacheLine(perWindow: Window[]): string {
  const ev = (name: string) => eventMean(perWindow, name);
  const l1 = ev('I1mr') + ev('D1mr') + ev('D1mw');
  const ll = ev('ILmr') + ev('DLmr') + ev('DLmw');
  const k = (n: number) => (n / 1e3).toFixed(1);
  return `main thread per request: I1 misses ${k(ev('I1mr'))} K, D1 misses ${k(ev('D1mr') + ev('D1mw'))} K, LL misses ${k(ll)} K; estimated cycles ${((ev('Ir') + 10 * l1 + 100 * ll) / 1e6).toFixed(2)} M`;
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
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  for (const variant of variants) {
    const perWindow = await count(variant, db, dir);
    // All counted requests together: a major GC every few hundred requests is part of the cost.
    const main = perWindow.map((w) => w.main).sort((a, b) => a - b);
    const all = perWindow.map((w) => w.all).sort((a, b) => a - b);
    counts.push([variant, mean(main)]);
    const ratio =
      counts.length > 1 ? `  ×${(mean(main) / counts[0][1]).toFixed(2)} ${counts[0][0]}` : '';
    const span = (xs: number[]) => `${m(xs[0])}–${m(xs.at(-1) as number)}`;
    console.log(
      `${variant.padEnd(15)} main thread ${m(mean(main))} M instructions/request (windows ${span(main)})${ratio}; all threads ${m(mean(all))} M (${span(all)})`,
    );
    if (cacheSim) console.log(`${''.padEnd(15)} ${cacheLine(perWindow)}`);
    if (branchSim) console.log(`${''.padEnd(15)} ${branchLine(perWindow)}`);
  }
} finally {
  if (keep) console.log(`callgrind dumps kept in ${dir}`);
  else await rm(dir, { recursive: true, force: true });
  await db.drop();
}
