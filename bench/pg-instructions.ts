/**
 * `npm run bench:pg-instructions`: PostgreSQL's own instructions per first call and per claim
 * shape, counted by callgrind in the backend that ran them, on a private throwaway cluster whose
 * postmaster runs under valgrind (every backend it forks is counted, each in its own file). Like
 * `bench:instructions` for the app, the count repeats within ~1% however busy the machine is,
 * where backend CPU time (`bench:pg-levers` parts 3 and 4) moves with the load. Kernel time
 * (sockets, WAL writes and fsyncs) is left out. Needs valgrind.
 *
 * Each case runs on two connections, one after the other: both WARMUP calls (the catalog caches
 * and the statement's plan), then BASE calls on one and BASE + CALLS on the other; the difference
 * of the two backends' totals over CALLS is one call's instructions, free of connection set-up.
 * PG_INSTRUCTIONS_CALLS (default 200), PG_INSTRUCTIONS_ROUNDS (default 2).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { openSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { migrate } from '../migrations/migrate.js';
import { clusterFolder, initdb, PG_BIN } from './private-cluster.js';
import { firstCall, rawClaim, shapedClaim, TABLE } from './pg-statements.js';

const CALLS = Number(process.env.PG_INSTRUCTIONS_CALLS ?? 200);
const ROUNDS = Number(process.env.PG_INSTRUCTIONS_ROUNDS ?? 2);
const [WARMUP, BASE] = [20, 30];

/** What both functions return: the store's claim columns. */
const RETURNS = `RETURNS TABLE (id uuid, claimed boolean, locked boolean, status varchar, same_request boolean, stale boolean,
  status_code smallint, expires_ms float8, seconds_left float8, response_headers jsonb, response_raw bytea,
  response_key_id varchar, digested boolean)`;
/** The scope's row as the store's claim reads it, `locked` from the named variable. */
const existingRow = (
  locked: string,
) => `SELECT k.id, false, ${locked}, k.status, k.request_hash = p_hash,
    CASE WHEN k.status = 'completed' THEN k.expires_at <= now() ELSE k.locked_until <= now() END,
    k.status_code, floor(extract(epoch FROM k.expires_at) * 1000)::float8,
    extract(epoch FROM k.expires_at - now())::float8,
    CASE WHEN k.request_hash = p_hash THEN k.response_headers END,
    CASE WHEN k.request_hash = p_hash THEN k.response_raw END,
    CASE WHEN k.request_hash = p_hash THEN k.response_key_id END, k.response_digest IS NOT NULL`;

/** The claim with its conflicting-row read in a PL/pgSQL function (only run when fetched). */
const READ_FUNCTION = `CREATE FUNCTION bench_existing(p_key varchar, p_endpoint varchar, p_user text, p_hash bpchar, p_locked boolean)
${RETURNS}
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY ${existingRow('p_locked')}
   FROM ${TABLE} k WHERE k.idempotency_key = p_key AND k.endpoint = p_endpoint AND k.user_id = p_user;
  IF NOT FOUND THEN
    RETURN QUERY SELECT NULL::uuid, false, p_locked, NULL::varchar, NULL::boolean, NULL::boolean,
      NULL::smallint, NULL::float8, NULL::float8, NULL::jsonb, NULL::bytea, NULL::varchar, NULL::boolean;
  END IF;
END $$`;

/**
 * The whole claim in a PL/pgSQL function: the lock, the insert (its plan cached in the function),
 * and the conflicting row's read only when the insert took nothing; a claimed row is returned
 * from variables, with no query.
 */
const CLAIM_FUNCTION = `CREATE FUNCTION bench_claim(p_key varchar, p_endpoint varchar, p_user text, p_hash bpchar,
  p_token uuid, p_lease float8, p_ttl float8, p_lock bigint)
${RETURNS}
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE v_id uuid;
BEGIN
  locked := pg_try_advisory_xact_lock(p_lock);
  IF locked THEN
    INSERT INTO ${TABLE} AS k (idempotency_key, endpoint, user_id, request_hash, owner_token, locked_until, expires_at)
    VALUES (p_key, p_endpoint, p_user, p_hash, p_token, now() + make_interval(secs => p_lease), now() + make_interval(secs => p_ttl))
    ON CONFLICT (idempotency_key, endpoint, user_id) DO NOTHING RETURNING k.id INTO v_id;
    IF v_id IS NOT NULL THEN
      id := v_id; claimed := true; same_request := true; stale := false; digested := false;
      RETURN NEXT;
      RETURN;
    END IF;
  END IF;
  RETURN QUERY ${existingRow('locked')}
   FROM (SELECT 1) one LEFT JOIN ${TABLE} k
     ON k.idempotency_key = p_key AND k.endpoint = p_endpoint AND k.user_id = p_user;
END $$`;

type Call = (c: pg.Client, key: string) => Promise<unknown>;
const CASES: Record<string, Call> = {
  'raw first call': (c, key) => firstCall(c, 'raw', key),
  'module first call': (c, key) => firstCall(c, 'module', key),
  'raw claim': (c, key) => c.query(rawClaim(key)),
  'store claim': (c, key) => c.query(shapedClaim('store', key)),
  'claim, no read': (c, key) => c.query(shapedClaim('no-read', key)),
  'claim, insert alone': (c, key) => c.query(shapedClaim('insert-alone', key)),
  'claim, one row': (c, key) => c.query(shapedClaim('one-row', key)),
  'claim, whole in a function': (c, key) => {
    const q = shapedClaim('store', key);
    return c.query({ ...q, name: 'shape_claim_function', text: 'SELECT * FROM bench_claim($1, $2, $3, $4, $5, $6, $7, $8)' }); // prettier-ignore
  },
  'claim, read in a function': (c, key) => {
    const q = shapedClaim('no-read', key);
    const read = `UNION ALL SELECT * FROM bench_existing($1, $2, $3, $4, (SELECT locked FROM lock))
 WHERE NOT EXISTS (SELECT 1 FROM ins)`;
    return c.query({ ...q, name: 'shape_read_function', text: `${shapedClaim('store', key).text.split('UNION ALL')[0]}${read}` }); // prettier-ignore
  },
};

const cluster = await clusterFolder('pg-instructions-');
const { dir, data, port, owner } = cluster;
const config = { host: '127.0.0.1', port, user: 'postgres', database: 'postgres' };

/** Runs `n` calls of a case on a new connection; resolves to its backend's instruction total. */
async function backendTotal(call: Call, n: number): Promise<number> {
  const c = new pg.Client(config);
  await c.connect();
  const pid = (await c.query('SELECT pg_backend_pid() AS p')).rows[0].p as number;
  const prefix = randomUUID();
  for (let i = 0; i < WARMUP + n; i++) await call(c, `${prefix}-${i}`);
  await c.end();
  const file = join(dir, `cg.${pid}`);
  for (let waited = 0; waited < 60_000; waited += 100) {
    const summary = existsSync(file) && /^totals: (\d+)/m.exec(readFileSync(file, 'utf8'));
    if (summary) return Number(summary[1]);
    await sleep(100);
  }
  throw new Error(`no callgrind totals from backend ${pid}`);
}

initdb(cluster);
const log = openSync(join(dir, 'valgrind.log'), 'a');
const server = spawn('valgrind', ['--tool=callgrind', `--callgrind-out-file=${dir}/cg.%p`, `${PG_BIN}/postgres`, '-D', data, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${dir}`, '-c', 'autovacuum=off'], { cwd: dir, ...owner, stdio: ['ignore', log, log] }); // prettier-ignore
const exited = new Promise((resolve) => server.once('exit', resolve));
try {
  for (let tries = 0; ; tries++) {
    const probe = new pg.Client(config);
    const up = await probe.connect().then(() => true, () => false); // prettier-ignore
    await probe.end().catch(() => undefined);
    if (up) break;
    if (tries > 600 || server.exitCode !== null) throw new Error(`postgres did not start (${dir})`);
    await sleep(200);
  }
  const pool = new pg.Pool(config);
  await migrate(pool);
  await pool.query(READ_FUNCTION);
  await pool.query(CLAIM_FUNCTION);
  await pool.end();
  console.log(`pg-instructions: backend instructions per call, ${CALLS} calls, ${ROUNDS} rounds`);
  const means: Record<string, number> = {};
  for (const [name, call] of Object.entries(CASES)) {
    const perCall: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const base = await backendTotal(call, BASE);
      perCall.push(((await backendTotal(call, BASE + CALLS)) - base) / CALLS);
    }
    means[name] = perCall.reduce((a, b) => a + b, 0) / perCall.length;
    const k = (x: number) => `${(x / 1000).toFixed(1)} K`;
    console.log(`  ${name.padEnd(26)} ${k(means[name]).padStart(9)}  (rounds ${perCall.map(k).join(', ')})`); // prettier-ignore
  }
  const ratio = (a: string, b: string) => `×${(means[a] / means[b]).toFixed(2)}`;
  const completion = (v: 'raw' | 'module', claim: string) =>
    means[`${v} first call`] - means[claim];
  console.log(`first call, module / raw ${ratio('module first call', 'raw first call')}; claim, store / raw ${ratio('store claim', 'raw claim')}`); // prettier-ignore
  console.log(`completion (first call minus claim): raw ${(completion('raw', 'raw claim') / 1000).toFixed(1)} K, module ${(completion('module', 'store claim') / 1000).toFixed(1)} K`); // prettier-ignore
  console.log(`claim shapes / store: no read ${ratio('claim, no read', 'store claim')}, insert alone ${ratio('claim, insert alone', 'store claim')}, read in a function ${ratio('claim, read in a function', 'store claim')}, whole in a function ${ratio('claim, whole in a function', 'store claim')}, one row ${ratio('claim, one row', 'store claim')}`); // prettier-ignore
} finally {
  server.kill('SIGINT');
  await exited;
  rmSync(dir, { recursive: true, force: true });
}
