/**
 * `npm run bench:threads -- --variants raw-sql,module [--scenario first|replay|nokey]
 * [--requests 8000] [--rounds 4] [--connections 32]`: where a request's CPU goes, read from /proc
 * (Linux) around each counted window: the server's threads (main thread, V8's helpers, libuv's
 * pool) in user and kernel time, its read/write system calls and context switches, and the same
 * for PostgreSQL's backends of the bench database and its background processes. The variants'
 * servers all run from the start; only one is loaded at a time, in an order that rotates each
 * round. Answers what `bench:instructions` (user space, main thread) cannot see.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { BenchDatabase } from './database.js';
import { keyedLoad, replayKeys } from './keyed-load.js';
import { median } from './report.js';
import { completeKeys } from './scenarios.js';
import { cleanUpOnce, startVariant, type VariantServer } from './servers.js';
import { toolArgs } from './tool-args.js';

const { variants, scenario, n } = toolArgs('raw-sql,module', {
  requests: 8000,
  warmup: 3000,
  rounds: 4,
  connections: 32,
});
const TICK_US = 10_000; // USER_HZ is 100 on Linux

/** One sampled figure per row name and process or thread (`row\0id`); summed by `perRequest`. */
type Counters = Map<string, number>;

function add(into: Counters, dir: string, name: string, value: number) {
  into.set(`${name}\0${dir}`, value);
}

/**
 * Each row's growth per request; a process or thread new since `before` counts from its start (a
 * pool reopens the connections it closed while another variant was loaded), one gone is left out.
 */
function perRequest(before: Counters, after: Counters, requests: number): Counters {
  const per: Counters = new Map();
  for (const [key, value] of after) {
    const row = key.slice(0, key.indexOf('\0'));
    per.set(row, (per.get(row) ?? 0) + (value - (before.get(key) ?? 0)) / requests);
  }
  return per;
}

function read(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined; // exited meanwhile
  }
}

/** utime, stime (µs) and context switches of a process or thread directory under /proc. */
function taskCounters(into: Counters, dir: string, row: string) {
  const stat = read(`${dir}/stat`);
  const status = read(`${dir}/status`);
  if (!stat || !status) return;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  add(into, dir, `${row} user µs`, Number(fields[11]) * TICK_US);
  add(into, dir, `${row} kernel µs`, Number(fields[12]) * TICK_US);
  add(into, dir, `${row} page faults`, Number(fields[7]) + Number(fields[9]));
  const switches = (kind: string) =>
    Number(new RegExp(`${kind}_ctxt_switches:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  add(into, dir, `${row} ctx switches`, switches('voluntary') + switches('nonvoluntary'));
}

function ioCounters(into: Counters, dir: string, row: string) {
  const io = read(`${dir}/io`);
  if (!io) return;
  add(into, dir, `${row} read syscalls`, Number(/syscr:\s+(\d+)/.exec(io)?.[1] ?? 0));
  add(into, dir, `${row} write syscalls`, Number(/syscw:\s+(\d+)/.exec(io)?.[1] ?? 0));
}

/** The server by thread kind, and every PostgreSQL process: the bench database's backends apart. */
function sample(serverPid: number, dbName: string): Counters {
  const c: Counters = new Map();
  for (const tid of readdirSync(`/proc/${serverPid}/task`)) {
    const comm = read(`/proc/${serverPid}/task/${tid}/comm`)?.trim() ?? '?';
    const kind =
      Number(tid) === serverPid ? 'main' : comm.startsWith('libuv') ? 'libuv' : 'helpers';
    taskCounters(c, `/proc/${serverPid}/task/${tid}`, `node ${kind}`);
  }
  ioCounters(c, `/proc/${serverPid}`, 'node');
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || read(`/proc/${entry}/comm`)?.trim() !== 'postgres') continue;
    const cmdline = read(`/proc/${entry}/cmdline`)?.replace(/\0/g, ' ') ?? '';
    const row = cmdline.includes(` ${dbName} `) ? 'pg backends' : 'pg other';
    taskCounters(c, `/proc/${entry}`, row);
    ioCounters(c, `/proc/${entry}`, row);
  }
  return c;
}

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const servers: VariantServer[] = [];
const cleanUp = cleanUpOnce(servers, db);
const prefix = (v: string) => `threads-${v}`;
const rounds = new Map<string, Counters[]>(variants.map((v) => [v, []]));
try {
  for (const name of variants) {
    const env = { DATABASE_URL: db.url, BENCH_POOL_SIZE: '10' };
    const server = await startVariant(name, env);
    servers.push(server);
    if (scenario === 'replay') await completeKeys(server.url, replayKeys(prefix(name)));
    await keyedLoad(server.url, {
      scenario,
      prefix: prefix(name),
      amount: n.warmup,
      connections: n.connections,
    });
  }
  for (let round = 0; round < n.rounds; round++) {
    const order = servers.map((_, i) => servers[(i + round) % servers.length]);
    for (const server of order) {
      const before = sample(server.pid, db.name);
      const started = performance.now();
      const result = await keyedLoad(server.url, {
        scenario,
        prefix: prefix(server.name),
        amount: n.requests,
        connections: n.connections,
      });
      const seconds = (performance.now() - started) / 1000;
      const after = sample(server.pid, db.name);
      if (result['2xx'] !== n.requests) throw new Error(`${server.name}: ${result.non2xx} not 2xx`);
      const per = perRequest(before, after, n.requests);
      per.set('req/s', result['2xx'] / seconds);
      rounds.get(server.name)?.push(per);
    }
  }
  const rows = [
    ...new Set([...rounds.values()].flatMap((list) => list.flatMap((c) => [...c.keys()]))),
  ];
  console.log(
    `${scenario}, ${n.connections} connections, ${n.rounds} rounds × ${n.requests} requests; per request, median of rounds (min–max)`,
  );
  console.log(['figure'.padEnd(26), ...variants.map((v) => v.padStart(24))].join(''));
  for (const row of rows.sort()) {
    const cells = variants.map((v) => {
      const values = (rounds.get(v) ?? []).map((c) => c.get(row) ?? 0);
      const fmt = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(2));
      return `${fmt(median(values))} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`.padStart(
        24,
      );
    });
    console.log([row.padEnd(26), ...cells].join(''));
  }
} finally {
  await cleanUp();
}
