/** No idempotency at all: the handler and its INSERT. */
import { Module } from '@nestjs/common';
import { benchController, createPool, insertPayment, serve } from './common.js';

const pool = createPool();

@Module({
  controllers: [benchController((req, amount) => insertPayment(pool, req, amount, 'baseline'))],
})
class BaselineModule {}

await serve(BaselineModule, { afterClose: () => pool.end() });
