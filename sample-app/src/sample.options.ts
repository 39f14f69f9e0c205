import type { IdempotencyModuleOptions } from '../../lib/index.js';

/** Settings of one sample-app instance (main.ts reads them from the environment; tests pass them). */
export interface SampleAppOptions {
  /** PostgreSQL connection URL of the app's database. */
  databaseUrl: string;
  /** How long the fake processor takes for `tok_slow`. Default: `SAMPLE_SLOW_MS`, else 3000. */
  slowMs?: number;
  /** Log every SQL statement (TypeORM `logging`). Default false. */
  logSql?: boolean;
  /** Overrides of the idempotency options (tests move records through time with SQL). */
  idempotency?: Partial<IdempotencyModuleOptions>;
}

export const SAMPLE_OPTIONS = Symbol('SAMPLE_OPTIONS');

export function slowMsFromEnv(): number {
  const raw = process.env.SAMPLE_SLOW_MS;
  const value = raw === undefined || raw === '' ? 3000 : Number(raw);
  if (!Number.isFinite(value) || value < 0)
    throw new Error(`SAMPLE_SLOW_MS must be a number of milliseconds, got ${raw}`);
  return value;
}
