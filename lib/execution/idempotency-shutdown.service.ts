import { type BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { IDEMPOTENCY_STORE } from '../idempotency.constants.js';
import { IDEMPOTENCY_RESOLVED_OPTIONS } from '../idempotency-internal.constants.js';
import { type ResolvedIdempotencyOptions, SHUTDOWN_DRAIN_MAX_MS } from '../idempotency.defaults.js';
import type { IdempotencyStore } from '../interfaces/idempotency-store.interface.js';
import { abandonRetries, retriesRunning } from './completion-retry.js';
import { drained, inFlightRuns } from './in-flight-runs.js';

/**
 * A graceful shutdown (`enableShutdownHooks`, a rolling deploy's SIGTERM) first lets the runs in
 * flight end: a handler still running, an outcome being written, a completion being retried.
 * The DataSource closes after this hook (the module's own, or TypeORM's), and a run whose
 * completion it cut would stay in progress until its lease ended and then run again.
 */
@Injectable()
export class IdempotencyShutdown implements BeforeApplicationShutdown {
  private readonly logger = new Logger('IdempotencyShutdown');

  constructor(
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
    @Inject(IDEMPOTENCY_RESOLVED_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async beforeApplicationShutdown(): Promise<void> {
    const counts = inFlightRuns(this.store);
    const busy = () => counts.runs > 0 || counts.writes > 0 || retriesRunning(this.store) > 0;
    if (busy()) {
      const maxMs = Math.min(SHUTDOWN_DRAIN_MAX_MS, this.options.leaseSeconds * 1000);
      this.logger.log(`Waiting up to ${maxMs} ms for ${counts.runs} run(s) in flight to end`);
      if (!(await drained(busy, maxMs))) {
        this.logger.error(
          `Shutting down with ${counts.runs} run(s) still in flight: their keys stay in progress until their leases end, and a retry may then run them again`,
        );
      }
    }
    await abandonRetries(this.store);
  }
}
