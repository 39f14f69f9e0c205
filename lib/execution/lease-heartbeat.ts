import type { LoggerService } from '@nestjs/common';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import type { IdempotencyStore, Lease } from '../interfaces/idempotency-store.interface.js';

/**
 * Renews a claim's lease every third of it while its handler runs, up to `maxHoldSeconds`.
 * A handler faster than a third of the lease never renews; a crashed process stops renewing.
 */
export class LeaseHeartbeat {
  private timer?: NodeJS.Timeout;
  /** The last renewal sent; none for a run that never renewed (no promise made per run). */
  private renewing?: Promise<unknown>;

  constructor(
    private readonly store: IdempotencyStore,
    private readonly lease: Lease,
    private readonly options: Pick<ResolvedIdempotencyOptions, 'leaseSeconds' | 'maxHoldSeconds'>,
    private readonly logger: LoggerService,
    private readonly describe: () => string,
  ) {}

  private stopAt?: number;

  /** `maxHoldSeconds` have passed since `start()` (renewed or halted): the lease is not renewed. */
  get expired(): boolean {
    return this.stopAt !== undefined && performance.now() >= this.stopAt;
  }

  start(): void {
    // Monotonic: a wall clock stepped forward must not end the renewals of a running handler.
    this.stopAt = performance.now() + this.options.maxHoldSeconds * 1000;
    this.renewEvery();
  }

  /** Renews again after `halt()`, until the same `maxHoldSeconds` as before. */
  resume(): void {
    if (this.timer === undefined && this.stopAt !== undefined && !this.expired) this.renewEvery();
  }

  private renewEvery(): void {
    const stopAt = this.stopAt as number;
    this.timer = setInterval(
      () => {
        if (performance.now() >= stopAt) {
          this.logger.warn?.(
            `${this.describe()} held its claim for maxHoldSeconds; no longer renewing its lease`,
          );
          return this.stop();
        }
        this.renewing = this.store.renew(this.lease, this.options.leaseSeconds).then(
          (held) => {
            if (!held) this.stop();
          },
          (err: Error) =>
            this.logger.warn?.(`Lease renewal failed for ${this.describe()}: ${err.message}`),
        );
      },
      (this.options.leaseSeconds * 1000) / 3,
    );
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Stops, and resolves once a renewal already sent has been answered. */
  async halt(): Promise<void> {
    this.stop();
    await this.renewing;
  }
}
