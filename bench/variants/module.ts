/** This library with its default options: `IdempotencyModule.forRoot({ dataSource })` + `@Idempotent()`. */
import { Module } from '@nestjs/common';
import type pg from 'pg';
import { DataSource } from 'typeorm';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { benchController, env, insertPayment, poolSize, serve } from './common.js';

const dataSource = new DataSource({
  type: 'postgres',
  url: env('DATABASE_URL'),
  extra: { max: poolSize() },
});
await dataSource.initialize();
// The handler writes through the same pg pool the library uses, as in the other variants.
const pool = (dataSource.driver as unknown as { master: pg.Pool }).master;

@Module({
  imports: [
    IdempotencyModule.forRoot({
      dataSource,
      // Defaults unless a run asks otherwise, to measure what each costs.
      ...(process.env.BENCH_REPLAY_AUDIT === 'off' && { replayAudit: 'off' as const }),
      ...(process.env.BENCH_REPLAY_CACHE === 'off' && { replayCache: false as const }),
    }),
  ],
  controllers: [
    benchController(
      (req, amount) => insertPayment(pool, req, amount, 'module'),
      () => Idempotent(),
    ),
  ],
})
class ModuleVariant {}

await serve(ModuleVariant, { afterClose: () => dataSource.destroy() });
