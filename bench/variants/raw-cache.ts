/**
 * The cached-replay floor: `raw-sql` plus an unbounded Map of completed bodies, so a replay is a
 * Map lookup and Nest's own reply. What a replay cannot go below inside a Nest interceptor.
 */
import { Module, UseInterceptors } from '@nestjs/common';
import { benchController, createPool, insertPayment, serve } from './common.js';
import { RawIdempotencyInterceptor, type RawReplayCache } from './raw-interceptor.js';

const pool = createPool();
const interceptor = new RawIdempotencyInterceptor(pool, new Map() as RawReplayCache);

@Module({
  controllers: [
    benchController(
      (req, amount) => insertPayment(pool, req, amount, 'raw-cache'),
      () => UseInterceptors(interceptor),
    ),
  ],
})
class RawCacheModule {}

await serve(RawCacheModule, { afterClose: () => pool.end() });
