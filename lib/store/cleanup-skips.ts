import type { CleanupResult } from '../interfaces/idempotency-store.interface.js';

/** Skipped runs in a row, with nobody cleaning meanwhile, before a warning. */
export const SKIPPED_RUNS_BEFORE_WARNING = 3;

/**
 * Counts cleanup runs skipped in a row. With several instances one skips whenever another
 * cleans, so a run recorded (by anyone) since the streak began starts it over; only a lock that
 * nobody cleans under (held by a stray connection, say) makes the streak grow.
 */
export class CleanupSkips {
  private count = 0;
  private since?: Date;

  /** Notes a run's result; returns the warning to log, or null. */
  note(result: CleanupResult): string | null {
    if (result.ran) {
      this.count = 0;
      return null;
    }
    const { at, lastRunAt } = result.skipped ?? {};
    if (this.count === 0 || (lastRunAt && this.since && lastRunAt > this.since)) {
      this.count = 0;
      this.since = at;
    }
    this.count++;
    if (this.count < SKIPPED_RUNS_BEFORE_WARNING) return null;
    const since = this.since
      ? ` and no instance has recorded a run since ${this.since.toISOString()}`
      : '';
    return `Cleanup skipped ${this.count} runs in a row${since}: something holds the cleanup's advisory lock (see pg_locks where locktype = 'advisory'), and expired idempotency records pile up`;
  }
}
