import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { IDEMPOTENCY_STORE } from '../idempotency.constants.js';
import { IDEMPOTENCY_RESOLVED_OPTIONS } from '../idempotency-internal.constants.js';
import { type ResolvedIdempotencyOptions, SHUTDOWN_DRAIN_MAX_MS } from '../idempotency.defaults.js';
import type { IdempotencyStore } from '../interfaces/idempotency-store.interface.js';
import { abandonRetries, retriesRunning } from './completion-retry.js';
import { drained, inFlightRuns } from './in-flight-runs.js';
import { closeIfModuleOwned } from '../store/module-owned-data-source.js';

/**
 * A graceful shutdown (`enableShutdownHooks`, a rolling deploy's SIGTERM) first lets the runs in
 * flight end: a handler still running, an outcome being written, a completion being retried.
 * The DataSource closes after this hook (TypeORM's, or the module's own, which this service
 * closes after a second wait), and a run whose completion it cut would stay in progress until
 * its lease ended and then run again.
 */
@Injectable()
export class IdempotencyShutdown implements BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger('IdempotencyShutdown');

  constructor(
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
    @Inject(IDEMPOTENCY_RESOLVED_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async beforeApplicationShutdown(): Promise<void> {
    await this.drain();
  }

  /**
   * Again just before the module's DataSource closes: a hybrid app closes its connected
   * microservices after every `beforeApplicationShutdown`, and they take messages until then.
   */
  async onApplicationShutdown(): Promise<void> {
    await this.drain();
    await abandonRetries(this.store);
    await this.store.close?.();
    // Nest lets an app shut down again once a shutdown settled: this module lets go once.
    if (this.closed) return;
    this.closed = true;
    await closeIfModuleOwned(this.options.dataSource);
  }

  /** Whether this module instance let go of a DataSource it shares (once, however many closes). */
  private closed = false;

  /** Both waits end by one deadline, set by the first: the shutdown waits at most that long. */
  private deadline?: number;

  private async drain(): Promise<void> {
    const counts = inFlightRuns(this.store);
    // A run whose handler returned to a caller that left has nothing more to wait for.
    for (const run of [...counts.unanswered]) run.concludeIfGone();
    const busy = () => counts.runs > 0 || counts.writes > 0 || retriesRunning(this.store) > 0;
    const maxMs = Math.min(SHUTDOWN_DRAIN_MAX_MS, this.options.leaseSeconds * 1000);
    this.deadline ??= performance.now() + maxMs;
    if (!busy()) return;
    const leftMs = Math.max(0, Math.round(this.deadline - performance.now()));
    this.logger.log(`Waiting up to ${leftMs} ms for ${this.inFlight(counts)} to end`);
    if (!(await drained(busy, leftMs))) {
      this.logger.error(
        `Shutting down with ${this.inFlight(counts)} still unfinished: their keys stay in progress until their leases end, and a retry may then run them again`,
      );
    }
  }

  /** What the drain waits for, by kind: a completion being retried is no run, but holds a key too. */
  private inFlight(counts: { runs: number; writes: number }): string {
    const parts = [
      `${counts.runs} run(s) in flight`,
      counts.writes > 0 && `${counts.writes} claim(s) being written`,
      retriesRunning(this.store) > 0 && `${retriesRunning(this.store)} completion(s) being retried`,
    ];
    return parts.filter(Boolean).join(', ');
  }
}
