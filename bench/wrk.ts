/**
 * `npm run bench:wrk -- --variants baseline,module [--scenario first|replay|nokey] [--seconds 10]
 * [--rounds 5] [--connections 32]`: the variants one after another (the order rotates each round),
 * each loaded by wrk (Debian's `wrk`, a C load generator in its own process) instead of autocannon
 * in the runner's Node process: a second harness, whose load generator takes less of the two
 * cores, for the figures issue 19 asks to hold "in both". Prints each variant's median req/s and
 * each variant's ratio to the first, of medians and round by round. Writes
 * bench/results/wrk-<time>.json. Nothing of it runs in CI: `apt-get install wrk` first.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { BenchDatabase } from './database.js';
import { replayKeys } from './keyed-load.js';
import { median } from './report.js';
import { completeKeys } from './scenarios.js';
import { cleanUpOnce, startVariant, type VariantServer } from './servers.js';
import { toolArgs } from './tool-args.js';

const run = promisify(execFile);
const { variants, scenario, n } = toolArgs('baseline,module', {
  seconds: 10,
  rounds: 5,
  connections: 32,
});
const { seconds, rounds, connections } = n;
const startedAt = new Date();

// One thread keeps the key counter unique; `first` keys carry the run's, round's and variant's tag.
const SCRIPT = `
wrk.method = "POST"
wrk.body = '{"amount":100}'
wrk.headers["Content-Type"] = "application/json"
local scenario, prefix, counter = "nokey", "", 0
function init(args) scenario = args[1]; prefix = args[2] end
function request()
  if scenario == "nokey" then return wrk.format(nil, "/payments") end
  counter = counter + 1
  local key = scenario == "replay" and (prefix .. "-" .. (counter % 1000)) or (prefix .. "-" .. counter)
  -- A headers table replaces wrk.headers: the content type goes with the key.
  return wrk.format(nil, "/payments", { ["Content-Type"] = "application/json", ["Idempotency-Key"] = key })
end
`;

async function wrk(url: string, script: string, tag: string): Promise<number> {
  const { stdout } = await run('wrk', [
    '-t1',
    `-c${connections}`,
    `-d${seconds}s`,
    '--timeout',
    '60s',
    '-s',
    script,
    url,
    '--',
    scenario,
    tag,
  ]);
  // wrk counts answers outside 2xx/3xx, and socket errors, apart: none is allowed.
  if (/Non-2xx or 3xx responses|Socket errors/.test(stdout)) {
    throw new Error(`${url} (${tag}): not every answer was 2xx:\n${stdout}`);
  }
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(stdout);
  if (!rps) throw new Error(`wrk printed no Requests/sec:\n${stdout}`);
  return Number(rps[1]);
}

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const servers: VariantServer[] = [];
const cleanUp = cleanUpOnce(servers, db);
const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-wrk-'));
const script = path.join(dir, 'load.lua');
const runTag = db.name;
try {
  await writeFile(script, SCRIPT);
  await run('wrk', ['--version']).catch((err: { stdout?: string; code?: unknown }) => {
    // wrk --version exits with 1 after printing its version.
    if (!err.stdout?.startsWith('wrk'))
      throw new Error('wrk is not installed: apt-get install wrk');
  });
  for (const name of variants) {
    servers.push(await startVariant(name, { DATABASE_URL: db.url, BENCH_POOL_SIZE: '10' }));
  }
  for (const [index, server] of servers.entries()) {
    const tag = `${runTag}-${index}`;
    if (scenario === 'replay') await completeKeys(server.url, replayKeys(tag));
    await wrk(server.url, script, scenario === 'replay' ? tag : `${tag}-warm`);
  }
  console.log(
    `${scenario}: ${rounds} rounds × ${seconds} s per variant, wrk -t1 -c${connections}, one variant at a time`,
  );
  const perRound: Record<string, number>[] = [];
  for (let round = 1; round <= rounds; round++) {
    const order = variants.map((_, i) => (i + round - 1) % variants.length);
    const result: Record<string, number> = {};
    for (const index of order) {
      const tag = scenario === 'replay' ? `${runTag}-${index}` : `${runTag}-${index}-r${round}`;
      result[variants[index]] = await wrk(servers[index].url, script, tag);
    }
    perRound.push(result);
    console.log(
      `  round ${round}: ${variants.map((v) => `${v} ${result[v].toFixed(0)}`).join(', ')} req/s`,
    );
  }
  const [first] = variants;
  const medians = Object.fromEntries(variants.map((v) => [v, median(perRound.map((r) => r[v]))]));
  for (const v of variants) {
    const ratios = perRound.map((r) => r[v] / r[first]);
    console.log(
      `${v.padEnd(16)} median ${medians[v].toFixed(0)} req/s; / ${first}: ratio of medians ` +
        `${(medians[v] / medians[first]).toFixed(3)}, round by round ${median(ratios).toFixed(3)} ` +
        `(${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)})`,
    );
  }
  const out = new URL('../../bench/results/', import.meta.url);
  await mkdir(out, { recursive: true });
  const file = new URL(`wrk-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`, out);
  const settings = { variants, scenario, seconds, rounds, connections };
  await writeFile(file, JSON.stringify({ startedAt, settings, perRound, medians }, null, 2) + '\n');
  console.log(`results: ${file.pathname}`);
} finally {
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await rm(dir, { recursive: true, force: true });
  await cleanUp();
}
