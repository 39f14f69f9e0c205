import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type BeforeApplicationShutdown,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { SchedulerRegistry } from '@nestjs/schedule';
import type { CronJob } from 'cron';
import { CLEANUP_JOB_NAME, IDEMPOTENCY_STORE } from '../idempotency.constants.js';
import { IDEMPOTENCY_RESOLVED_OPTIONS } from '../idempotency-internal.constants.js';
import type { ResolvedIdempotencyOptions } from '../idempotency.defaults.js';
import type { CleanupResult, IdempotencyStore } from '../interfaces/idempotency-store.interface.js';
import { CleanupSkips } from './cleanup-skips.js';
import {
  loadOptionalSchedule,
  scheduleNotLoadable,
  type OptionalSchedule,
} from './optional-schedule.loader.js';
import { telemetry } from '../telemetry/idempotency.telemetry.js';

/**
 * Deletes expired records. Registered as a cron job with the app's `SchedulerRegistry`
 * (the app imports `ScheduleModule.forRoot()`); `run()` can also be called on demand.
 */
@Injectable()
export class IdempotencyCleanupService
  implements OnApplicationBootstrap, BeforeApplicationShutdown
{
  private readonly logger = new Logger('IdempotencyCleanup');
  private job?: CronJob;
  private running?: Promise<CleanupResult>;
  private readonly skips = new CleanupSkips();

  constructor(
    @Inject(IDEMPOTENCY_RESOLVED_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
    private readonly moduleRef: ModuleRef,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (!this.options.cleanup.enabled) return;
    let registry: SchedulerRegistry;
    let schedule: OptionalSchedule;
    try {
      schedule = await loadOptionalSchedule();
    } catch (err) {
      throw scheduleNotLoadable(err);
    }
    try {
      registry = this.moduleRef.get(schedule.SchedulerRegistry, { strict: false });
    } catch {
      this.logger.warn(
        'ScheduleModule.forRoot() is not imported: expired idempotency records are not cleaned up on a schedule; call IdempotencyCleanupService.run() yourself',
      );
      return;
    }
    this.job = schedule.CronJob.from({
      cronTime: this.options.cleanup.cron,
      onTick: () =>
        void this.run().catch((err: Error) => this.logger.error(`Cleanup failed: ${err.message}`)),
      start: false,
    });
    registry.addCronJob(CLEANUP_JOB_NAME, this.job as never);
    this.job.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.job?.stop();
    await this.running?.catch(() => undefined);
  }

  /**
   * Deletes expired records (older than `expires_at` plus retention) in batches. Only one app
   * instance cleans at a time (PostgreSQL advisory lock, held by the run's transaction); the others
   * return `ran: false`. Runs skipped three times in a row while no instance recorded a run are
   * logged at WARN.
   */
  run(): Promise<CleanupResult> {
    this.running ??= this.store
      .cleanup({
        batchSize: this.options.cleanup.batchSize,
        retentionSeconds: this.options.cleanup.retentionSeconds,
      })
      .then((result) => {
        const stuck = this.skips.note(result);
        if (stuck) this.logger.warn(stuck);
        telemetry.cleanupRan(result);
        if (result.ran) {
          const line = `Deleted ${result.deleted} expired idempotency records in ${result.batches} batches (slowest ${result.longestBatchMs} ms)`;
          // Every ten minutes by default: a run that found nothing is not news.
          if (result.deleted > 0) this.logger.log(line);
          else this.logger.debug?.(line);
        } else {
          this.logger.debug?.('Another instance holds the cleanup lock; skipped');
        }
        return result;
      })
      .finally(() => (this.running = undefined));
    return this.running;
  }
}
