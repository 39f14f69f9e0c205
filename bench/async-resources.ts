/**
 * `npm run bench:async -- --variants raw-single,module-single [--scenario first|replay|nokey]
 * [--requests 2000] [--connections 8]`: async resources created per request in each variant's
 * server after the warm-up, by type (promises, timers, `process.nextTick` ticks, immediates), from
 * an async_hooks `init` count. Exact and repeatable: what a lever saves in promises or timers.
 * `--sites on`: also each promise's and timer's creating frame (the first outside Node and rxjs),
 * per request, the `--top` most frequent.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { toolArgs } from './tool-args.js';
import { BenchDatabase } from './database.js';
import { countInServer } from './signalled-window.js';

const { variants, scenario, n, args } = toolArgs(
  'raw-single,module-single',
  { requests: 2000, warmup: 1000, connections: 8, top: 30 },
  ['sites'],
);
const { requests, warmup, connections, top } = n;
if (args.get('sites') === 'on') process.env.BENCH_ASYNC_SITES = '1';
const preload = fileURLToPath(new URL('./async-resources.preload.mjs', import.meta.url));
const SHOWN = ['PROMISE', 'Timeout', 'TickObject', 'Immediate'];

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-async-'));
try {
  console.log(
    `${scenario}, ${connections} connections: ${warmup} warm-up, then ${requests} counted requests per variant`,
  );
  for (const variant of variants) {
    const written = await countInServer(variant, db, {
      preload,
      outVariable: 'BENCH_ASYNC_OUT',
      out: path.join(dir, `${variant}.json`),
      scenario,
      warmup,
      requests,
      connections,
    });
    const { sites, ...byType } = JSON.parse(written) as Record<string, number> & {
      sites?: Record<string, number>;
    };
    const per = (type: string) => ((byType[type] ?? 0) / requests).toFixed(2);
    console.log(
      `${variant.padEnd(17)} per request: ${SHOWN.map((t) => `${t} ${per(t)}`).join(', ')}`,
    );
    const bySite = Object.entries(sites ?? {}).sort((a, b) => b[1] - a[1]);
    for (const [site, count] of bySite.slice(0, top)) {
      console.log(`  ${(count / requests).toFixed(2).padStart(6)}  ${site}`);
    }
  }
} finally {
  await rm(dir, { recursive: true, force: true });
  await db.drop();
}
