/** This library without its in-process replay cache (`replayCache: false`): every replay reads its record. */
import { Module } from '@nestjs/common';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { benchController, insertPayment, libraryDataSource, serve } from './common.js';

const { storage, pool, close } = await libraryDataSource();

@Module({
  imports: [IdempotencyModule.forRoot({ ...storage, replayCache: false })],
  controllers: [
    benchController(
      (req, amount) => insertPayment(pool, req, amount, 'module-nocache'),
      () => Idempotent(),
    ),
  ],
})
class ModuleNoCacheVariant {}

await serve(ModuleNoCacheVariant, { afterClose: close });
