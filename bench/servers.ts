/** Starts each variant as its own Node process (compiled to dist-bench/bench/variants/*.js). */
import { type ChildProcess, execFileSync, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { VariantName } from './config.js';

export interface VariantServer {
  name: VariantName;
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** What a variant's server reads: the run's database, a pool of 10, Redis for the peer. */
export function serverEnv(db: { url: string; name: string }): Record<string, string> {
  return {
    DATABASE_URL: db.url,
    BENCH_POOL_SIZE: '10',
    BENCH_REDIS_PREFIX: `${db.name}-peer`,
    REDIS_URL: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
  };
}

/** `toolArgs`: a tool's own node flags (its preload, its profiler), after the run's. */
export async function startVariant(
  name: VariantName,
  env: Record<string, string>,
  timeoutMs = 30_000,
  toolArgs: string[] = [],
  /** A file descriptor the server's standard output goes to, instead of this process's. */
  stdout?: number,
): Promise<VariantServer> {
  const file = fileURLToPath(new URL(`./variants/${name}.js`, import.meta.url));
  // e.g. BENCH_VARIANT_NODE_ARGS="--no-allocation-site-pretenuring" for every server of the run.
  const extraArgs = process.env.BENCH_VARIANT_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = fork(file, [], {
    execArgv: [...process.execArgv, ...extraArgs, ...toolArgs],
    env: { ...process.env, ...env },
    stdio: ['ignore', stdout ?? 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name} did not start within ${timeoutMs} ms`)),
      timeoutMs,
    );
    child.on('message', (msg: { type?: string; port?: number }) => {
      if (msg?.type === 'ready' && msg.port) {
        clearTimeout(timer);
        resolve(msg.port);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited during start (code ${code}, signal ${signal})`));
    });
  }).catch(async (err) => {
    await stopChild(child);
    throw err;
  });
  pinServer(child.pid as number);
  // e.g. BENCH_SETTLE_MS=12000: every server idles this long after it listens, before any load.
  const settleMs = Number(process.env.BENCH_SETTLE_MS ?? 0);
  if (settleMs > 0) await new Promise((r) => setTimeout(r, settleMs));
  return {
    name,
    url: `http://127.0.0.1:${port}`,
    pid: child.pid as number,
    stop: () => stopChild(child),
  };
}

/**
 * e.g. BENCH_SERVER_CPUS=0 (run the bench itself under `taskset -c 1`): every thread the server
 * has once it listens runs on those CPUs only, so its load generator does not share its core.
 */
function pinServer(pid: number): void {
  const cpus = process.env.BENCH_SERVER_CPUS;
  if (cpus) execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
}

/** SIGTERM (the server closes its app and pools), SIGKILL if it lingers. */
function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/**
 * Stops the servers started so far and drops the run's database, once: when the run ends, or at
 * Ctrl-C (exit 130), so an interrupted run leaves no `bench_*` database behind.
 */
export function cleanUpOnce(
  servers: VariantServer[],
  db: { drop(): Promise<void> },
): () => Promise<void> {
  let cleaned = false;
  const cleanUp = async () => {
    if (cleaned) return;
    cleaned = true;
    await Promise.all(servers.map((s) => s.stop()));
    await db.drop();
  };
  process.once('SIGINT', () => void cleanUp().finally(() => process.exit(130)));
  return cleanUp;
}
