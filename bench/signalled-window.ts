import { readFile, rm } from 'node:fs/promises';
import type { VariantName } from './config.js';
import type { BenchDatabase } from './database.js';
import { keyedLoad, type KeyedScenario } from './keyed-load.js';
import { serverEnv, startVariant } from './servers.js';

export interface SignalledWindow {
  /** A preload (`--import`) that starts counting on the first SIGUSR2 and writes `out` on the second. */
  preload: string;
  /** The environment variable that tells the preload where to write. */
  outVariable: string;
  out: string;
  scenario: KeyedScenario;
  warmup: number;
  requests: number;
  /** Concurrent connections of the load (keyedLoad's 8 by default). */
  connections?: number;
}

/**
 * Starts `variant` with `preload`, sends the warm-up, then counts `requests` between two SIGUSR2
 * and returns what the preload wrote (it writes aside and renames, so a file seen is complete).
 */
export async function countInServer(
  variant: VariantName,
  db: BenchDatabase,
  w: SignalledWindow,
): Promise<string> {
  // A variant named twice in one run must not read its first run's file.
  await rm(w.out, { force: true });
  const server = await startVariant(
    variant,
    { ...serverEnv(db), [w.outVariable]: w.out },
    undefined,
    ['--import', w.preload],
  );
  try {
    const load = (amount: number) =>
      keyedLoad(server.url, {
        scenario: w.scenario,
        prefix: `${w.outVariable}-${variant}`,
        amount,
        connections: w.connections,
      });
    await load(w.warmup);
    process.kill(server.pid, 'SIGUSR2');
    const result = await load(w.requests);
    if (result['2xx'] !== w.requests) throw new Error(`${variant}: ${result.non2xx} not 2xx`);
    process.kill(server.pid, 'SIGUSR2');
    for (let i = 0; i < 100; i++) {
      const written = await readFile(w.out, 'utf8').catch(() => undefined);
      if (written) return written;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`${variant}: the server wrote nothing to ${w.out}`);
  } finally {
    await server.stop();
  }
}
