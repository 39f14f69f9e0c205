import { createRequire } from 'node:module';
import type { SchedulerRegistry } from '@nestjs/schedule';
import type { CronJob } from 'cron';

/** What the cleanup job needs from `@nestjs/schedule` (an optional peer dependency). */
export interface OptionalSchedule {
  SchedulerRegistry: typeof SchedulerRegistry;
  CronJob: typeof CronJob;
}

/**
 * Loads `@nestjs/schedule` only when cleanup is scheduled, so apps with `cleanup.enabled: false`
 * need not install it. `import()` (not `require`) so the registry class is the app's very
 * instance, and `cron` from `@nestjs/schedule`'s own dependencies, the version its registry
 * expects. Rejects when the package is not installed.
 */
export async function loadOptionalSchedule(): Promise<OptionalSchedule> {
  const { SchedulerRegistry } = await import('@nestjs/schedule');
  const schedulePath = createRequire(import.meta.url).resolve('@nestjs/schedule');
  const { CronJob } = createRequire(schedulePath)('cron') as typeof import('cron');
  return { SchedulerRegistry, CronJob };
}

/** Cleanup is on but could never run: start-up stops, saying why and what to do. */
export function scheduleNotLoadable(cause: unknown): Error {
  return new Error(
    `nestjs-pg-idempotency: cleanup.enabled is true but @nestjs/schedule could not be loaded (${(cause as Error)?.message ?? String(cause)}). ` +
      'Expired idempotency records would never be deleted. Fix: npm install @nestjs/schedule and import ScheduleModule.forRoot() in the app module, ' +
      'or set cleanup: { enabled: false } and call IdempotencyCleanupService.run() yourself.',
    { cause },
  );
}
