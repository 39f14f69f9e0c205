/**
 * `npm run bench`: starts every variant as its own process on a fresh database, runs the
 * scenarios in interleaved rounds, checks each cell's rows, prints one table and writes JSON.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { type CellRun, runCell } from './cell.js';
import { readConfig, type VariantName } from './config.js';
import { BenchDatabase } from './database.js';
import { formatRatios, formatTable, summarize, targetRatios } from './report.js';
import { cleanUpOnce, startVariant, type VariantServer } from './servers.js';

const config = readConfig();
const startedAt = new Date();
const notes: string[] = [];
const runs: CellRun[] = [];
const servers: VariantServer[] = [];

console.log(
  `bench: ${config.rounds} round(s) × ${config.duration} s per cell, warm-up ${config.warmup} s, ` +
    `${config.connections} connections (conflict ${config.conflictConnections} on ${config.conflictKeys} keys), ` +
    `pool ${config.poolSize}; node ${process.version}, ${os.cpus().length} CPUs`,
);
const db = await BenchDatabase.create(config.adminUrl);
console.log(`database ${db.name} created and migrated`);
if (!(await db.checkpoint()))
  notes.push('CHECKPOINT is not permitted for this user: cells may pay for checkpoints unevenly');

const cleanUp = cleanUpOnce(servers, db);

/** module-tx, module-single and module-pg-single need `@Idempotent({ transactional })`: the server says whether its handler got a transaction. */
async function transactionalMissing(server: VariantServer): Promise<string | undefined> {
  const res = await fetch(`${server.url}/payments`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'idempotency-key': `probe-${randomBytes(6).toString('hex')}`,
    },
    body: JSON.stringify({ amount: 1 }),
  });
  await res.arrayBuffer();
  if (res.status >= 300) return `the probe request answered ${res.status}`;
  if (res.headers.get('x-bench-tx') !== '1') {
    return `@Idempotent({ transactional: ${server.name === 'module-tx' ? 'true' : "'single'"} }) is not available in lib/ yet (the handler got no transaction)`;
  }
  return undefined;
}

async function start(name: VariantName): Promise<void> {
  try {
    const server = await startVariant(name, {
      DATABASE_URL: db.url,
      REDIS_URL: config.redisUrl,
      BENCH_REDIS_PREFIX: `${db.name}-peer`,
      BENCH_POOL_SIZE: String(config.poolSize),
    });
    const transactional =
      name === 'module-tx' || name === 'module-single' || name === 'module-pg-single';
    const skip = transactional ? await transactionalMissing(server) : undefined;
    if (skip) {
      await server.stop();
      throw new Error(skip);
    }
    servers.push(server);
  } catch (err) {
    notes.push(`${name}: skipped: ${(err as Error).message}`);
    console.log(`NOTE ${notes[notes.length - 1]}`);
  }
}

const us = (value: number | null) => (value === null ? '-' : value.toFixed(0));

function printRun(run: CellRun, label: string): void {
  const { tally } = run;
  console.log(
    `  ${label} ${run.scenario.padEnd(11)} ${run.variant.padEnd(9)} ${run.rps.toFixed(0).padStart(6)} req/s` +
      `  p50 ${run.p50.toFixed(0)} ms  p99 ${run.p99.toFixed(0)} ms  non-2xx ${run.non2xx}` +
      `  cpu/req ${us(run.cpu.server)} µs node + ${us(run.cpu.store)} µs store` +
      `  rows ${run.db.rows} (ran ${tally.executed}, replayed ${tally.replayed})` +
      (run.problems.length === 0 ? '  ok' : ''),
  );
  for (const problem of run.problems)
    console.log(`FAIL ${label} ${run.variant} ${run.scenario}: ${problem}`);
}

try {
  for (const name of config.variants) await start(name);
  if (config.warmup > 0) {
    console.log('warm-up');
    for (const server of servers) {
      for (const scenario of config.scenarios) {
        printRun(await runCell(db, config, server, scenario, 0, config.warmup), 'w ');
      }
    }
  }
  for (let round = 1; round <= config.rounds; round++) {
    console.log(`round ${round}/${config.rounds}`);
    for (const scenario of config.scenarios) {
      // Rotate the order every round so no variant always runs first.
      const shift = (round - 1) % servers.length;
      for (const server of [...servers.slice(shift), ...servers.slice(0, shift)]) {
        const run = await runCell(db, config, server, scenario, round);
        runs.push(run);
        printRun(run, `r${round}`);
      }
    }
  }
} finally {
  await cleanUp();
}

const variants = config.variants.filter((v) => servers.some((s) => s.name === v));
const summary = summarize(runs, variants, config.scenarios);
const ratios = targetRatios(summary, runs);
const failures = runs.filter((r) => r.problems.length > 0);
console.log(
  `\nMedians over ${config.rounds} round(s) of ${config.duration} s (min–max of req/s across rounds):\n`,
);
console.log(formatTable(summary));
console.log(`\nRatios of median req/s (pairs measured in this run):\n${formatRatios(ratios)}`);
for (const note of notes) console.log(`NOTE ${note}`);
for (const run of failures) {
  for (const problem of run.problems)
    console.log(`FAIL r${run.round} ${run.variant} ${run.scenario}: ${problem}`);
}

const dir = new URL('../../bench/results/', import.meta.url);
await mkdir(dir, { recursive: true });
const file = new URL(`${startedAt.toISOString().replace(/[:.]/g, '-')}.json`, dir);
const { adminUrl: _admin, redisUrl: _redis, ...settings } = config;
await writeFile(
  file,
  JSON.stringify(
    {
      startedAt,
      node: process.version,
      nodeArgs: process.env.BENCH_VARIANT_NODE_ARGS ?? '',
      cpus: os.cpus().length,
      settings,
      notes,
      summary,
      ratios,
      runs,
    },
    null,
    2,
  ) + '\n',
);
console.log(`\nresults: ${file.pathname}`);
if (failures.length > 0) process.exitCode = 1;
