import type { IdempotencyStore } from '../interfaces/idempotency-store.interface.js';

/** A store's runs in this process: claims whose handler has not settled, statements being written. */
export interface InFlightRuns {
  runs: number;
  /** Claims on their way (a claim that commits makes a run) and outcomes being written. */
  writes: number;
}

const byStore = new WeakMap<IdempotencyStore, InFlightRuns>();

export function inFlightRuns(store: IdempotencyStore): InFlightRuns {
  let counts = byStore.get(store);
  if (!counts) byStore.set(store, (counts = { runs: 0, writes: 0 }));
  return counts;
}

/**
 * Resolves once `busy()` has been false at two checks in a row `everyMs` apart (a run between
 * its handler's end and its write is busy again by the second), or after `maxMs`: false then.
 */
export async function drained(busy: () => boolean, maxMs: number, everyMs = 50): Promise<boolean> {
  const end = performance.now() + maxMs;
  let quiet = 0;
  while (quiet < 2) {
    if (performance.now() >= end) return false;
    quiet = busy() ? 0 : quiet + 1;
    if (quiet < 2) await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  return true;
}
