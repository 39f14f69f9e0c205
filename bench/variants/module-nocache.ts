/** This library without its in-process replay cache (`replayCache: false`): every replay reads its record. */
import { Module } from '@nestjs/common';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { benchController, insertPayment, libraryDataSource, serve } from './common.js';

const { dataSource, pool } = await libraryDataSource();

@Module({
  imports: [IdempotencyModule.forRoot({ dataSource, replayCache: false })],
  controllers: [
    benchController(
      (req, amount) => insertPayment(pool, req, amount, 'module-nocache'),
      () => Idempotent(),
    ),
  ],
})
class ModuleNoCacheVariant {}

await serve(ModuleNoCacheVariant, { afterClose: () => dataSource.destroy() });
