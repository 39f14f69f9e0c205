/**
 * `npm run bench:sites -- --variants module,raw-cache [--scenario replay] [--requests 5000]`:
 * the allocation sites V8 pretenured in each server (objects of a tenured site are allocated in
 * the old generation and, once dead, keep what they point to alive across scavenges until the
 * next mark-compact), named by the function whose literal they are. The server runs with
 * `--trace-pretenuring`; after the load `pretenured-sites.preload.mjs` prints the feedback vector
 * of every function it can reach, and the addresses are matched. A site of a function it cannot
 * reach (a closure, a module's private function) is counted as unnamed.
 */
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchDatabase } from './database.js';
import { keyedLoad } from './keyed-load.js';
import { serverEnv, startVariant } from './servers.js';
import { toolArgs } from './tool-args.js';
import type { VariantName } from './config.js';

const { variants, scenario, n } = toolArgs('module,raw-cache', {
  requests: 5000,
  warmup: 3000,
  timeout: 300,
});
const preload = fileURLToPath(new URL('./pretenured-sites.preload.mjs', import.meta.url));
const DECISION =
  /AllocationSite\((0x[0-9a-f]+)\): \(created, found, ratio\) \((\d+), (\d+), [\d.]+\) (.+?) => (.+)$/;

interface Sites {
  tenured: string[];
  names: Map<string, string[]>;
}

async function sites(variant: VariantName, db: BenchDatabase, dir: string): Promise<Sites> {
  // A file, not a pipe: V8 prints with C stdio, which a full non-blocking pipe would cut short.
  const out = path.join(dir, `${variant}.log`);
  const file = await open(out, 'w');
  const server = await startVariant(
    variant,
    serverEnv(db),
    undefined,
    [
      '--allow-natives-syntax',
      '--trace-pretenuring',
      '--trace-pretenuring-statistics',
      '--import',
      preload,
    ],
    file.fd,
  );
  try {
    const load = (amount: number) =>
      keyedLoad(server.url, { scenario, prefix: `sites-${variant}`, amount });
    await load(n.warmup);
    await load(n.requests);
    process.kill(server.pid, 'SIGUSR2');
    const deadline = Date.now() + n.timeout * 1000;
    while (!(await readFile(out, 'utf8')).includes('\nSITES-DONE\n')) {
      if (Date.now() > deadline)
        throw new Error(`${variant}: the walk did not end in ${n.timeout} s`);
      await new Promise((r) => setTimeout(r, 1000));
    }
  } finally {
    await server.stop();
    await file.close();
  }
  return parse(await readFile(out, 'utf8'));
}

/** The last decision per address, and the functions whose feedback vector holds each site. */
function parse(text: string): Sites {
  const last = new Map<string, string>();
  const names = new Map<string, string[]>();
  let fn = '';
  for (const line of text.split('\n')) {
    const decision = DECISION.exec(line);
    if (decision) last.set(decision[1], decision[5].trim());
    else if (line.startsWith('SITES-FN ')) fn = line.slice(9);
    else if (fn && line.includes('<AllocationSite>')) {
      const address = /(0x[0-9a-f]+) <AllocationSite>/.exec(line)?.[1];
      if (address) names.set(address, [...(names.get(address) ?? []), fn]);
    }
  }
  const tenured = [...last].filter(([, d]) => d === 'tenure').map(([a]) => a);
  return { tenured, names };
}

const db = await BenchDatabase.create(
  process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
);
const dir = await mkdtemp(path.join(os.tmpdir(), 'bench-sites-'));
try {
  console.log(`${scenario}: ${n.warmup} warm-up and ${n.requests} requests per variant`);
  for (const variant of variants) {
    const { tenured, names } = await sites(variant, db, dir);
    const named = tenured.filter((a) => names.has(a));
    console.log(
      `${variant}: ${tenured.length} sites tenured at the end, ${named.length} named` +
        `, ${tenured.length - named.length} in functions the walk did not reach`,
    );
    for (const a of named) console.log(`  ${a} ${[...new Set(names.get(a))].join(', ')}`);
  }
} finally {
  await rm(dir, { recursive: true, force: true });
  await db.drop();
}
