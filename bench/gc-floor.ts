/**
 * `npm run bench:gc-floor [-- --requests 30000 --connections 8]`: what `bench:gc` measures
 * (scavenges' kept and promoted bytes per request), for servers with no database and no Nest
 * (bench/gc-floor.server.mjs): node:http alone, node:http giving each request and response a
 * prototype of its own as Express 5 does, an empty Express 5 app, and node:http keeping a value
 * per request in a WeakMap. `BENCH_FLOORS` picks others (see the server's list): the Express app
 * with one thing a replay adds per response, or with the library's dispatcher layer (put under
 * `app.response` once per app). Shows which part of what every bench variant promotes is the HTTP
 * layer's, before any library code runs.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { toolArgs } from './tool-args.js';

// Its servers are not the bench variants: a --variants given is checked and ignored.
const { n } = toolArgs('baseline', { requests: 30000, warmup: 10000, connections: 8 });
const { requests, warmup, connections } = n;
/** `BENCH_FLOORS=express,express-buffer` measures those servers only (the server names them all). */
const FLOORS = (
  process.env.BENCH_FLOORS ?? 'node-http,node-http-prototype,express,node-http-weakmap'
)
  .split(',')
  .map((name) => name.trim())
  .filter(Boolean);
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

function load(url: string, amount: number): Promise<autocannon.Result> {
  return new Promise((resolve, reject) =>
    autocannon(
      {
        url: `${url}/payments`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"amount":1}',
        connections,
        amount,
      },
      (err, result) => (err ? reject(err) : resolve(result)),
    ),
  );
}

async function measure(floor: string, out: string) {
  const child = spawn(
    process.execPath,
    ['--import', here('./gc-observer.preload.mjs'), here('./gc-floor.server.mjs')],
    {
      env: { ...process.env, BENCH_FLOOR: floor, BENCH_GC_OUT: out },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  try {
    // A server that exits before printing its port (an unknown name) must fail the run, not hang it.
    const [line] = (await Promise.race([
      once(child.stdout, 'data'),
      once(child, 'exit').then(([code]) => {
        throw new Error(`${floor}: the server exited (code ${code}) before listening`);
      }),
    ])) as [Buffer];
    const url = `http://127.0.0.1:${/PORT (\d+)/.exec(line.toString())?.[1]}`;
    await load(url, warmup);
    child.kill('SIGUSR2');
    const result = await load(url, requests);
    if (result['2xx'] !== requests) throw new Error(`${floor}: ${result.non2xx} not 2xx`);
    child.kill('SIGUSR2');
    for (let i = 0; i < 100; i++) {
      const written = await readFile(out, 'utf8').catch(() => undefined);
      if (written)
        return JSON.parse(written) as {
          survivedBytes: number;
          promotedBytes: number;
          pauses: Record<string, { count: number }>;
        };
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`${floor}: the server wrote nothing to ${out}`);
  } finally {
    child.kill('SIGTERM');
  }
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-gc-floor-'));
try {
  console.log(
    `${connections} connections: ${warmup} warm-up, then ${requests} counted requests per server`,
  );
  for (const floor of FLOORS) {
    const { survivedBytes, promotedBytes, pauses } = await measure(
      floor,
      path.join(dir, `${floor}.json`),
    );
    const kb = (bytes: number) => (bytes / requests / 1024).toFixed(2);
    const counts = Object.entries(pauses)
      .map(([kind, p]) => `${kind} ${p.count}×`)
      .join(', ');
    console.log(
      `${floor.padEnd(20)} scavenges kept ${kb(survivedBytes)} KB/request, promoted ${kb(promotedBytes)} KB/request (${counts})`,
    );
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
