/** This library with its default options: `IdempotencyModule.forRoot({ dataSource })` + `@Idempotent()`. */
import { Module } from '@nestjs/common';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { benchController, insertPayment, libraryDataSource, serve } from './common.js';

const { dataSource, pool } = await libraryDataSource();

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
