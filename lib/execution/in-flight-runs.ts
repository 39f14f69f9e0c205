import type { IdempotencyStore } from '../interfaces/idempotency-store.interface.js';

/** A store's runs in this process: claims whose handler has not settled, statements being written. */
export interface InFlightRuns {
  runs: number;
  /** Claims on their way (a claim that commits makes a run) and outcomes being written. */
  writes: number;
  /** Runs whose handler returned with nothing written yet, checked by one timer for them all. */
  unanswered: Set<UnansweredRun>;
  watcher?: NodeJS.Timeout;
}

/** A run whose handler returned while nothing was written yet (`UnansweredWatch`). */
export interface UnansweredRun {
  /** Every `everyMs` while it waits. */
  tick(): void;
  /** Recorded as run without a body, if its caller is gone (a graceful shutdown). */
  concludeIfGone(): void;
}

const byStore = new WeakMap<IdempotencyStore, InFlightRuns>();

/** Watches `run` until it leaves `counts.unanswered`; one interval for all, while any waits. */
export function watchUnanswered(counts: InFlightRuns, run: UnansweredRun, everyMs: number): void {
  counts.unanswered.add(run);
  if (counts.watcher) return;
  counts.watcher = setInterval(() => {
    for (const waiting of counts.unanswered) waiting.tick();
    if (counts.unanswered.size === 0) {
      clearInterval(counts.watcher);
      counts.watcher = undefined;
    }
  }, everyMs);
  counts.watcher.unref();
}

export function inFlightRuns(store: IdempotencyStore): InFlightRuns {
  let counts = byStore.get(store);
  if (!counts) byStore.set(store, (counts = { runs: 0, writes: 0, unanswered: new Set() }));
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
