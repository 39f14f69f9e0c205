import type { IdempotencyModuleOptions } from '../../lib/index.js';
import type { SampleAppOptions } from './sample.options.js';

/** The sample's connections in `pg_stat_activity` (both flavours open one pool, named so). */
export const SAMPLE_APPLICATION_NAME = 'payments-sample';

/** Replayable for 24 h; records are kept 7 more days for reconciliation (see sql/reconciliation). */
export const IDEMPOTENCY_TTL_SECONDS = 24 * 3600;
export const IDEMPOTENCY_RETENTION_SECONDS = 7 * 24 * 3600;

/** The idempotency options both flavours share (each adds its `pool` or `dataSource`). */
export function idempotencySettings(options: SampleAppOptions): Partial<IdempotencyModuleOptions> {
  return {
    getUserId: (req) => req.user?.id,
    ttlSeconds: IDEMPOTENCY_TTL_SECONDS,
    cleanup: { retentionSeconds: IDEMPOTENCY_RETENTION_SECONDS },
    // For ctx.keyFor(): one secret for every instance, kept across deploys (a secret store in
    // production; the fallback is for running the sample locally only).
    derivedKeySecret:
      process.env.IDEMPOTENCY_DERIVED_KEY_SECRET ?? 'sample-app-local-only-derived-key-secret',
    ...options.idempotency,
  };
}
