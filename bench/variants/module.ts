/** This library with its default options: `IdempotencyModule.forRoot({ dataSource })` + `@Idempotent()`. */
import { Module } from '@nestjs/common';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import {
  benchController,
  insertPayment,
  libraryDataSource,
  optionsFromEnv,
  serve,
} from './common.js';

const { dataSource, pool } = await libraryDataSource();

@Module({
  imports: [IdempotencyModule.forRoot({ dataSource, ...optionsFromEnv() })],
  controllers: [
    benchController(
      (req, amount) => insertPayment(pool, req, amount, 'module'),
      () => Idempotent(),
    ),
  ],
})
class ModuleVariant {}

await serve(ModuleVariant, { afterClose: () => dataSource.destroy() });
