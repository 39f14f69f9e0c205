/**
 * The raw-SQL floor: the design written by hand (`raw-interceptor.ts`) with plain pg, every
 * replay read from the database: what the library is measured against.
 */
import { Module, UseInterceptors } from '@nestjs/common';
import { benchController, createPool, insertPayment, serve } from './common.js';
import { RawIdempotencyInterceptor } from './raw-interceptor.js';

const pool = createPool();
const interceptor = new RawIdempotencyInterceptor(pool);

@Module({
  controllers: [
    benchController(
      (req, amount) => insertPayment(pool, req, amount, 'raw-sql'),
      () => UseInterceptors(interceptor),
    ),
  ],
})
class RawSqlModule {}

await serve(RawSqlModule, { afterClose: () => pool.end() });
