/**
 * The cached-replay floor: `raw-sql` plus an unbounded Map of completed bodies, so a replay is a
 * Map lookup and Nest's own reply. What a replay cannot go below inside a Nest interceptor.
 */
import { serveBehindInterceptor } from './common.js';
import { RawIdempotencyInterceptor, type RawReplayCache } from './raw-interceptor.js';

await serveBehindInterceptor(
  'raw-cache',
  (pool) => new RawIdempotencyInterceptor(pool, new Map() as RawReplayCache),
);
