import { Logger } from '@nestjs/common';
import type { IdempotencyStore } from '../interfaces/idempotency-store.interface.js';
import type { ServerChange } from '../store/postgres/server-identity.js';
import { ReplayCache } from './replay-cache.js';
import type { ReplayCacheLimits } from '../idempotency.defaults.js';

/**
 * The module's replay cache, dropped whenever the store reports that its server may have
 * changed: after a failover with asynchronous replication, a cached response may stand for a
 * record (and a payment) the new primary never received, and another instance would run the
 * key again while this one kept replaying the lost run.
 */
export function invalidatedReplayCache(
  limits: ReplayCacheLimits | false,
  store: IdempotencyStore,
): ReplayCache {
  const cache = new ReplayCache(limits);
  if (!limits || !store.onServerChange) return cache;
  const logger = new Logger('IdempotencyReplayCache');
  let known = false;
  store.onServerChange((change) => {
    cache.clear();
    const c = change as Partial<ServerChange>;
    // The first identity seen is the start, not news; a lost connection is logged by pg's pool.
    if (c.type === 'identity' && known)
      logger.warn(`PostgreSQL server changed (${c.identity}): replay cache dropped`);
    if (c.type === 'identity') known = true;
  });
  return cache;
}
