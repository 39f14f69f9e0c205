/**
 * The library with its default options (`@Idempotent()`), on a TypeORM DataSource (`module`) or on
 * the bench's own pg pool (`module-pg`): the handler writes through the pool the library uses.
 */
import { Module } from '@nestjs/common';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import {
  benchController,
  insertPayment,
  libraryDataSource,
  libraryPool,
  optionsFromEnv,
  serve,
} from './common.js';

export async function serveDefaultVariant(
  variant: string,
  source: 'dataSource' | 'pool',
): Promise<void> {
  const { storage, pool, close } =
    source === 'pool' ? await libraryPool() : await libraryDataSource();

  @Module({
    imports: [IdempotencyModule.forRoot({ ...storage, ...optionsFromEnv() })],
    controllers: [
      benchController(
        (req, amount) => insertPayment(pool, req, amount, variant),
        () => Idempotent(),
      ),
    ],
  })
  class DefaultVariant {}

  await serve(DefaultVariant, { afterClose: close });
}
