/**
 * The peer: @node-idempotency/nestjs with its Redis storage adapter (module defaults but a
 * per-run key prefix, so the keys can be deleted afterwards).
 */
import { Module } from '@nestjs/common';
import { Idempotent, NodeIdempotencyModule } from '@node-idempotency/nestjs';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';
import { benchController, createPool, env, insertPayment, serve } from './common.js';

const pool = createPool();
const prefix = env('BENCH_REDIS_PREFIX');
const storage = new RedisStorageAdapter({ url: env('REDIS_URL') });
await storage.connect();

interface ScanClient {
  scanIterator(options: { MATCH: string; COUNT: number }): AsyncIterable<string>;
  unlink(keys: string[]): Promise<number>;
}

/** Deletes this run's keys; the adapter keeps its redis client private. */
async function deleteKeys(): Promise<void> {
  const client = (storage as unknown as { client: ScanClient }).client;
  const batch: string[] = [];
  for await (const key of client.scanIterator({ MATCH: `${prefix}:*`, COUNT: 1000 })) {
    batch.push(key);
    if (batch.length === 500) await client.unlink(batch.splice(0));
  }
  if (batch.length > 0) await client.unlink(batch);
}

@Module({
  imports: [
    NodeIdempotencyModule.forRootAsync({ storage: { adapter: storage }, cacheKeyPrefix: prefix }),
  ],
  controllers: [
    benchController(
      (req, amount) => insertPayment(pool, req, amount, 'peer'),
      () => Idempotent(),
    ),
  ],
})
class PeerModule {}

await serve(PeerModule, { beforeClose: deleteKeys, afterClose: () => pool.end() });
