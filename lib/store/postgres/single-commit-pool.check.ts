import type { IdempotencyStore } from '../../interfaces/idempotency-store.interface.js';
import { PostgresIdempotencyStore } from './postgres-idempotency.store.js';

/** Below this pool size, single-commit routes leave too little for everything else. */
export const MIN_SINGLE_COMMIT_POOL = 4;

/**
 * The start-up warning for single-commit routes on a small pool, when the store's pool size can
 * be known (the PostgreSQL store; `poolSize`/`extra.max` before a DataSource is initialized).
 */
export function smallPoolWarning(store: IdempotencyStore): string | undefined {
  if (!(store instanceof PostgresIdempotencyStore)) return undefined;
  const max = store.poolMax;
  if (max >= MIN_SINGLE_COMMIT_POOL) return undefined;
  return `nestjs-pg-idempotency: single-commit routes (transactional: 'single') on a pool of ${max}: each open transaction holds a connection until its COMMIT, so at most ${Math.max(1, max - 1)} run at once and one connection is left for everything else (the handlers' own queries through the DataSource, other routes); give the pool at least ${MIN_SINGLE_COMMIT_POOL} connections (TypeORM \`poolSize\` or \`extra.max\`)`;
}
