/**
 * Shared helpers of the reliability specs: bounded waiting, a concurrency pool, latency
 * summaries, and child app processes (test/reliability/child/server.ts, compiled with tsc).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until it returns a truthy value; throws `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs: number,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() >= deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** Runs `worker` over `items` with at most `concurrency` in flight; results in item order. */
export async function runPool<T, R>(
  items: readonly T[],
  concurrency: number,
  worker: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await worker(items[index], index);
    }
  });
  await Promise.all(lanes);
  return results;
}

/** Deterministic shuffle (mulberry32), so a failing order can be replayed. */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  let a = seed >>> 0;
  const random = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** The value of a settled promise, or its error thrown (after the caller kept what succeeded). */
export function settledValue<T>(result: PromiseSettledResult<T>): T {
  if (result.status === 'rejected') throw result.reason;
  return result.value;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export function latencySummary(values: readonly number[]): string {
  const f = (n: number) => n.toFixed(1);
  return `n=${values.length} p50=${f(percentile(values, 50))} ms p99=${f(percentile(values, 99))} ms max=${f(Math.max(...values))} ms`;
}

/** `{ a: 3, b: 1 }` for `['a', 'b', 'a', 'a']`, keys sorted. */
export function tally(labels: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const label of [...labels].sort()) counts[label] = (counts[label] ?? 0) + 1;
  return counts;
}

/** What the child app writes each execution to (see child/server.ts). */
export const EXECUTIONS_TABLE = `CREATE TABLE reliability_executions (id serial PRIMARY KEY,
  idempotency_key text, instance text, started_at timestamptz NOT NULL DEFAULT clock_timestamp())`;

/**
 * Compiles the child app with tsc into `dist-test/<name>/` (git-ignored), one folder per spec so
 * parallel jest workers never write the same files; incremental, so a re-run costs ~2 s.
 * Returns the path of the compiled server.
 */
/**
 * Builds the child app and creates a migrated database with the executions table it writes to.
 * `keep` gets the database as soon as it exists, so afterAll can drop it even if the build failed.
 */
export async function prepareChildRun(
  name: string,
  keep: (db: MigratedDatabase) => void,
): Promise<{ db: MigratedDatabase; script: string }> {
  // Settled, not Promise.all: a failed build must still leave the database to afterAll.
  const [built, created] = await Promise.allSettled([
    buildChildApp(name),
    createMigratedDatabase(`rel_${name.replace(/-/g, '_')}`),
  ]);
  if (created.status === 'fulfilled') keep(created.value);
  const script = settledValue(built);
  const db = settledValue(created);
  await db.dataSource.query(EXECUTIONS_TABLE);
  return { db, script };
}

export async function buildChildApp(name: string): Promise<string> {
  const outDir = join(ROOT, 'dist-test', name);
  await promisify(execFile)(
    process.execPath,
    [
      join(ROOT, 'node_modules/typescript/bin/tsc'),
      '-p',
      join(ROOT, 'test/reliability/child/tsconfig.json'),
      '--outDir',
      outDir,
      '--incremental',
      '--tsBuildInfoFile',
      join(outDir, 'tsconfig.tsbuildinfo'),
    ],
    { cwd: ROOT, timeout: 150_000 },
  ).catch((error: Error & { stdout?: string }) => {
    throw new Error(
      `tsc failed for the reliability child app: ${error.message}\n${error.stdout ?? ''}`,
    );
  });
  const script = join(outDir, 'test/reliability/child/server.js');
  if (!existsSync(script)) throw new Error(`tsc did not produce ${script}`);
  return script;
}

export interface ChildOptions {
  script: string;
  databaseUrl: string;
  instance: string;
  handlerMs?: number;
  leaseSeconds?: number;
  /** `single`: the route is `transactional: 'single'` (see child/server.ts). */
  mode?: 'lease' | 'single';
  /** More environment for the child (see child/server.ts). */
  env?: Record<string, string>;
  /** Preload child/clock-shift.ts, so `shiftClock` can move the child's wall clock. */
  clockShift?: boolean;
}

export interface ChildApp {
  instance: string;
  url: string;
  pid: number;
  process: ChildProcess;
  /** Resolves with the signal or exit code once the process is gone. */
  exited: Promise<string>;
  /** Everything it printed (stdout and stderr), for failure messages. */
  output(): string;
  /** Kills it with `signal` (SIGKILL after 5 s if still there) and waits until it is gone. */
  kill(signal?: NodeJS.Signals): Promise<string>;
  /** Moves the child's wall clock by `ms` (needs `clockShift`); resolves once it took effect. */
  shiftClock(ms: number): Promise<void>;
}

/** Every child app started and not yet gone, so a spec can stop them all, even after a failure. */
const children = new Set<ChildProcess>();

/** SIGKILLs every child app this worker started that is still running, and waits for them. */
export async function killChildApps(): Promise<void> {
  await Promise.all(
    [...children].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}

/** Spawns the compiled child app and waits (≤ 30 s) until it listens. */
export function startChildApp(o: ChildOptions): Promise<ChildApp> {
  const preload = pathToFileURL(join(dirname(o.script), 'clock-shift.js')).href;
  const args = o.clockShift ? ['--import', preload, o.script] : [o.script];
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: o.databaseUrl,
      INSTANCE: o.instance,
      HANDLER_MS: String(o.handlerMs ?? 50),
      LEASE_SECONDS: String(o.leaseSeconds ?? 60),
      MODE: o.mode ?? 'lease',
      ...o.env,
    },
    stdio: o.clockShift ? ['pipe', 'pipe', 'pipe', 'ipc'] : ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let output = '';
  let started = false;
  const exited = new Promise<string>((resolve) =>
    child.once('exit', (code, signal) => resolve(signal ?? `exit ${code}`)),
  );
  return new Promise<ChildApp>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`child ${o.instance} did not start within 30 s:\n${output}`));
    }, 30_000);
    child.once('exit', () => {
      clearTimeout(timer);
      reject(new Error(`child ${o.instance} exited before listening:\n${output}`));
    });
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const ready = started ? null : /READY (\{.*\})/.exec(output);
      if (!ready) return;
      started = true;
      clearTimeout(timer);
      const { port, pid } = JSON.parse(ready[1]) as { port: number; pid: number };
      resolve({
        instance: o.instance,
        url: `http://127.0.0.1:${port}`,
        pid,
        process: child,
        exited,
        output: () => output,
        kill: async (signal = 'SIGKILL') => {
          if (child.exitCode !== null || child.signalCode !== null) return exited;
          child.kill(signal);
          // A graceful stop that hangs must not hang the spec: SIGKILL after 5 s.
          const force = setTimeout(() => child.kill('SIGKILL'), 5_000);
          return exited.finally(() => clearTimeout(force));
        },
        shiftClock: (ms) => shiftClock(child, ms),
      });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  });
}

function shiftClock(child: ChildProcess, ms: number): Promise<void> {
  if (!child.send) return Promise.reject(new Error('the child was started without clockShift'));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the child did not shift its clock')), 5_000);
    child.once('message', () => {
      clearTimeout(timer);
      resolve();
    });
    child.send({ clockShiftMs: ms });
  });
}
