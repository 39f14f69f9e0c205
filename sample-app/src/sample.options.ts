import type { IdempotencyModuleOptions } from '../../lib/index.js';

/** How the app reaches PostgreSQL: its own `pg.Pool` (the default), or a TypeORM `DataSource`. */
export type SampleOrm = 'pg' | 'typeorm';

/** Settings of one sample-app instance (main.ts reads them from the environment; tests pass them). */
export interface SampleAppOptions {
  /** PostgreSQL connection URL of the app's database. */
  databaseUrl: string;
  /** Data access: plain `pg` (default), or TypeORM. Default: `SAMPLE_ORM`, else `'pg'`. */
  orm?: SampleOrm;
  /** How long the fake processor takes for `tok_slow`. Default: `SAMPLE_SLOW_MS`, else 3000. */
  slowMs?: number;
  /** Log every SQL statement. Default false. */
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

export function ormFromEnv(): SampleOrm {
  const raw = process.env.SAMPLE_ORM || 'pg';
  if (raw !== 'pg' && raw !== 'typeorm')
    throw new Error(`SAMPLE_ORM must be pg or typeorm, got ${raw}`);
  return raw;
}
