/**
 * `npm run bench:pg-levers`: issue 19's two PostgreSQL-side levers on a private throwaway cluster
 * (initdb in a temp folder, free port; removed at the end, also on failure), with the store's own
 * claim (buildStatements(...).claim, the store's bind values).
 * 1. Crash loss: a claim acknowledged, then every server process SIGKILLed at once and the cluster
 *    restarted: does the row survive crash recovery, synchronous_commit on vs off?
 * 2. The claim alone, CLIENTS concurrent clients, alternating rounds: synchronous_commit on vs off,
 *    idx_<table>_created_at with vs without. PG_LEVERS_TRIALS, _STATEMENTS (per client), _ROUNDS.
 * 3. PostgreSQL's share of a first call: the store's claim and completion against the raw floor's
 *    (bench/variants/raw-statements.ts), PG_LEVERS_SHARE_CLIENTS concurrent clients (default 1),
 *    alternating rounds: backend CPU per first call, and per statement pg_stat_statements' mean
 *    execution time and WAL bytes.
 * 4. The claim's statement shape, PG_LEVERS_SHARE_CLIENTS clients, alternating rounds: the store's
 *    claim against the same without its conflicting-row read (`UNION ALL` branch, never executed
 *    on a first call), and that against the insert alone (no advisory lock): backend CPU per claim.
 * PG_LEVERS_PARTS picks which (default 1,2,3).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { migrate } from '../migrations/migrate.js';
import { clusterFolder, initdb, PG_BIN } from './private-cluster.js';
import { claim, firstCall, shapedClaim, TABLE, type Shape } from './pg-statements.js';

const TRIALS = Number(process.env.PG_LEVERS_TRIALS ?? 10);
const PER_CLIENT = Number(process.env.PG_LEVERS_STATEMENTS ?? 2000);
const ROUNDS = Number(process.env.PG_LEVERS_ROUNDS ?? 3);
const CLIENTS = 4;
const PARTS = (process.env.PG_LEVERS_PARTS ?? '1,2,3').split(',');
/** Part 3's concurrent connections (PG_LEVERS_SHARE_CLIENTS): 1, or 10 as the bench's servers. */
const SHARE_CLIENTS = Number(process.env.PG_LEVERS_SHARE_CLIENTS ?? 1);
const INDEX = `idx_${TABLE}_created_at`;

const cluster = await clusterFolder('pg-levers-');
const { dir, data, port, owner, asPg } = cluster;
const connect = async () => {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
  client.on('error', () => undefined); // the crash trials cut the connection on purpose
  await client.connect();
  return client;
};

// The cluster runs under a child-subreaper (PID 1 here reaps no orphans): when every server
// process is SIGKILLed, the reaper collects them all and exits, so a crash leaves no zombie whose
// PID would keep postmaster.pid "alive" and block the restart.
const REAPER = `import ctypes, os, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
pid = os.fork()
if pid == 0:
    out = os.open('pg_ctl.out', os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(out, 1); os.dup2(out, 2)
    if len(sys.argv) > 3: os.setgroups([]); os.setgid(int(sys.argv[2])); os.setuid(int(sys.argv[1]))
    argv = sys.argv[-1].split('\\x1f')
    os.execv(argv[0], argv)
while True:
    try: p, status = os.waitpid(-1, 0)
    except ChildProcessError: break
    if p == pid: print(os.waitstatus_to_exitcode(status), flush=True)`;
let reaper: ChildProcess | undefined;
let running: string[] = [];

async function start(settings: string[]): Promise<void> {
  running = settings;
  const opts = ['-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${dir}`, '-c', 'shared_preload_libraries=pg_stat_statements']; // prettier-ignore
  for (const s of settings) opts.push('-c', s);
  const pgCtl = [`${PG_BIN}/pg_ctl`, '-D', data, '-l', join(dir, 'log'), '-w', '-o', opts.join(' '), 'start']; // prettier-ignore
  const ids = owner ? [String(owner.uid), String(owner.gid)] : [];
  const child = spawn('python3', ['-c', REAPER, ...ids, pgCtl.join('\x1f')], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] }); // prettier-ignore
  reaper = child;
  const code = await new Promise<string>((resolve) => {
    child.stdout.once('data', (b: Buffer) => resolve(b.toString().trim()));
    child.once('exit', () => resolve('reaper exited'));
  });
  const tail = (file: string) => readFileSync(join(dir, file), 'utf8').slice(-1500);
  if (code !== '0') throw new Error(`pg_ctl start: ${code}\n${tail('pg_ctl.out')}\n${tail('log')}`);
}

/** SIGKILL to the postmaster's process group (pg_ctl makes it a group leader): all at once. */
async function crash(): Promise<void> {
  const pm = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const pgid = Number(readFileSync(`/proc/${pm}/stat`, 'utf8').split(') ')[1].split(' ')[2]);
  if (pgid !== pm) throw new Error(`postmaster ${pm} is not its group's leader (${pgid})`);
  const gone = new Promise((resolve) => reaper?.once('exit', resolve));
  process.kill(-pm, 'SIGKILL');
  await gone;
}

async function stop(): Promise<void> {
  if (!reaper || reaper.exitCode !== null || reaper.signalCode !== null) return;
  const gone = new Promise((resolve) => reaper?.once('exit', resolve));
  execFileSync(`${PG_BIN}/pg_ctl`, ['-D', data, '-m', 'fast', '-w', 'stop'], asPg);
  await gone;
}

async function crashTrial(sync: 'on' | 'off', walWriterDelay: string): Promise<boolean> {
  const settings = [`wal_writer_delay=${walWriterDelay}`];
  if (running.join() !== settings.join()) await stop().then(() => start(settings));
  const key = `crash-${randomUUID()}`;
  const client = await connect();
  await client.query(`SET synchronous_commit = ${sync}`);
  const { rows } = await client.query(claim(key));
  if (rows[0]?.claimed !== true) throw new Error('the claim was not acknowledged');
  await crash(); // acknowledged: the handler would now charge the card
  await start(settings);
  const check = await connect();
  const found = await check.query(`SELECT 1 FROM ${TABLE} WHERE idempotency_key = $1`, [key]);
  await check.end();
  return found.rowCount === 1;
}

type Round = { perSec: number; p50: number; wal: number; cpu: number };

/**
 * One round: empty table, checkpoint, `clients` x PER_CLIENT claims, each client in sequence;
 * the claim's statement in `shape` (part 4) or the store's.
 */
async function round(
  sync: 'on' | 'off',
  index: boolean,
  shape: Shape = 'store',
  clientCount = CLIENTS,
): Promise<Round> {
  const admin = await connect();
  await admin.query(`TRUNCATE ${TABLE} CASCADE`);
  await admin.query(index ? `CREATE INDEX IF NOT EXISTS ${INDEX} ON ${TABLE} (created_at)` : `DROP INDEX IF EXISTS ${INDEX}`); // prettier-ignore
  await admin.query('CHECKPOINT');
  const clients = await Promise.all(Array.from({ length: clientCount }, connect));
  const setup = `SELECT set_config('synchronous_commit', $1, false), pg_backend_pid() AS p`;
  const pids = await Promise.all(clients.map(async (c) => (await c.query(setup, [sync])).rows[0].p as number)); // prettier-ignore
  const cpu0 = backendsCpu(pids);
  const prefix = randomUUID();
  const lsn = (await admin.query('SELECT pg_current_wal_lsn() AS l')).rows[0].l as string;
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    clients.map(async (c, i) => {
      for (let n = 0; n < PER_CLIENT; n++) {
        const s = performance.now();
        await c.query(shapedClaim(shape, `${prefix}-${i}-${n}`));
        latencies.push(performance.now() - s);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = backendsCpu(pids) - cpu0;
  const wal = await admin.query('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1) AS b', [lsn]);
  await Promise.all([admin, ...clients].map((c) => c.end()));
  const total = clientCount * PER_CLIENT;
  const perSec = total / seconds;
  return { perSec, p50: median(latencies), wal: Number(wal.rows[0].b) / total, cpu: cpu / total };
}

/** User + system CPU of the server backends, in µs (clock ticks of 10 ms in /proc). */
const backendsCpu = (pids: number[]) =>
  pids
    .map((p) => readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' '))
    .reduce((sum, f) => sum + (Number(f[11]) + Number(f[12])) * 10_000, 0);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (r: Round) =>
  `${r.perSec.toFixed(0).padStart(6)}/s  p50 ${r.p50.toFixed(2).padStart(5)} ms  ${r.wal.toFixed(0)} WAL B/claim  backend CPU ${r.cpu.toFixed(0)} µs/claim`; // prettier-ignore

/** Alternating rounds of two variants (the order flips each round); medians and their ratio. */
async function compare(name: string, a: [string, () => Promise<Round>], b: typeof a) {
  const results: Record<string, Round[]> = { [a[0]]: [], [b[0]]: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const [label, run] of r % 2 ? [b, a] : [a, b]) {
      const result = await run();
      results[label].push(result);
      console.log(`  ${name} ${label.padEnd(9)} round ${r + 1}: ${fmt(result)}`);
    }
  }
  const med = (rs: Round[]): Round => {
    const of = (k: keyof Round) => median(rs.map((x) => x[k]));
    return { perSec: of('perSec'), p50: of('p50'), wal: of('wal'), cpu: of('cpu') };
  };
  const [ma, mb] = [med(results[a[0]]), med(results[b[0]])];
  console.log(`${name} ${a[0]}: ${fmt(ma)}\n${name} ${b[0]}: ${fmt(mb)}`);
  console.log(`${name} ${b[0]} / ${a[0]}: statements/s ×${(mb.perSec / ma.perSec).toFixed(2)}, p50 ×${(mb.p50 / ma.p50).toFixed(2)}, backend CPU ×${(mb.cpu / ma.cpu).toFixed(2)}\n`); // prettier-ignore
}

type Share = { cpu: number; statements: Map<string, { us: number; wal: number }> };

/**
 * One round of PER_CLIENT first calls on each of SHARE_CLIENTS connections at once (the bench's
 * servers keep 10); pg_stat_statements reset before it.
 */
async function shareRound(variant: 'module' | 'raw'): Promise<Share> {
  const admin = await connect();
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  await admin.query('CHECKPOINT');
  const clients = await Promise.all(Array.from({ length: SHARE_CLIENTS }, () => connect()));
  const pids: number[] = [];
  for (const c of clients) {
    pids.push((await c.query('SELECT pg_backend_pid() AS p')).rows[0].p as number);
    await firstCall(c, variant, `warm-${randomUUID()}`);
  }
  await admin.query('SELECT pg_stat_statements_reset()');
  const cpu0 = backendsCpu(pids);
  await Promise.all(
    clients.map(async (c) => {
      const prefix = randomUUID();
      for (let n = 0; n < PER_CLIENT; n++) await firstCall(c, variant, `${prefix}-${n}`);
    }),
  );
  const calls = PER_CLIENT * SHARE_CLIENTS;
  const cpu = (backendsCpu(pids) - cpu0) / calls;
  const { rows } = await admin.query(
    `SELECT query, mean_exec_time * 1000 AS us, wal_bytes::float8 / calls AS wal
       FROM pg_stat_statements WHERE calls = $1`,
    [calls],
  );
  await Promise.all([admin, ...clients].map((x) => x.end()));
  const name = (q: string) => (q.trimStart().startsWith('UPDATE') ? 'completion' : 'claim');
  return { cpu, statements: new Map(rows.map((r) => [name(r.query), { us: r.us, wal: r.wal }])) };
}

async function compareShares(): Promise<void> {
  const results: Record<'module' | 'raw', Share[]> = { module: [], raw: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const variant of r % 2 ? (['module', 'raw'] as const) : (['raw', 'module'] as const)) {
      const share = await shareRound(variant);
      results[variant].push(share);
      const parts = [...share.statements].map(([q, s]) => `${q} ${s.us.toFixed(1)} µs ${s.wal.toFixed(0)} WAL B`); // prettier-ignore
      console.log(`  ${variant.padEnd(6)} round ${r + 1}: backend CPU ${share.cpu.toFixed(0)} µs/first call; ${parts.join('; ')}`); // prettier-ignore
    }
  }
  const cpu = (v: 'module' | 'raw') => median(results[v].map((x) => x.cpu));
  console.log(`backend CPU per first call, medians: raw ${cpu('raw').toFixed(0)} µs, module ${cpu('module').toFixed(0)} µs, ×${(cpu('module') / cpu('raw')).toFixed(2)}`); // prettier-ignore
}

process.once('SIGINT', () => {
  try {
    execFileSync(`${PG_BIN}/pg_ctl`, ['-D', data, '-m', 'immediate', 'stop'], asPg);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    process.exit(130);
  }
});

try {
  console.log(`pg-levers: ${dir}, port ${port}, load average ${loadavg()[0].toFixed(1)}`);
  initdb(cluster);
  await start([]);
  const pool = new pg.Pool({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
  console.log(`migrations applied: ${(await migrate(pool)).join(', ')}`);
  await pool.end();

  if (PARTS.includes('1')) {
    // Interleaved; a trial restarts the cluster with its wal_writer_delay when it differs.
    const cases = [['on', '10000ms'], ['off', '10000ms'], ['off', '200ms']] as const; // prettier-ignore
    const survived = cases.map(() => 0);
    for (let t = 0; t < TRIALS; t++) {
      for (const [i, [sync, delay]] of cases.entries())
        survived[i] += +(await crashTrial(sync, delay));
    }
    console.log(`\n1. crash loss (${TRIALS} trials each, acknowledged claim, SIGKILL of every process, restart):`); // prettier-ignore
    for (const [i, [sync, delay]] of cases.entries()) {
      console.log(`   synchronous_commit=${sync.padEnd(3)} wal_writer_delay=${delay.padEnd(7)}: ${survived[i]}/${TRIALS} claims survived`); // prettier-ignore
    }
  }
  // The cluster now runs with wal_writer_delay=200ms, the default.
  if (PARTS.includes('2')) {
    console.log(`\n2. claim statement, ${CLIENTS} clients x ${PER_CLIENT}, ${ROUNDS} alternating rounds:`); // prettier-ignore
    await compare('sync', ['on', () => round('on', true)], ['off', () => round('off', true)]);
    await compare('index', ['with', () => round('on', true)], ['without', () => round('on', false)]); // prettier-ignore
  }
  if (PARTS.includes('3')) {
    console.log(`\n3. a first call's statements, ${SHARE_CLIENTS} client(s) x ${PER_CLIENT}, ${ROUNDS} alternating rounds:`); // prettier-ignore
    await compareShares();
  }
  if (PARTS.includes('4')) {
    console.log(`\n4. the claim's shape, ${SHARE_CLIENTS} client(s) x ${PER_CLIENT}, ${ROUNDS} alternating rounds:`); // prettier-ignore
    const shape = (name: Shape): [string, () => Promise<Round>] => [name, () => round('on', true, name, SHARE_CLIENTS)]; // prettier-ignore
    await compare('shape', shape('store'), shape('no-read'));
    await compare('shape', shape('no-read'), shape('insert-alone'));
  }
  console.log(`load average at the end ${loadavg()[0].toFixed(1)}`);
} finally {
  await stop().catch((err) => console.error(`pg_ctl stop: ${String(err)}`));
  rmSync(dir, { recursive: true, force: true });
}
