/**
 * A ruler, not a design: the raw-SQL floor whose handler first does `BENCH_PAD` rounds of busy
 * work (default 80: about the main-thread instructions and the allocations a library first call
 * adds to the floor's, `npm run bench:instructions -- --variants raw-sql,raw-sql-padded,module`).
 * Nothing else differs from `raw-sql`, so its req/s ratio to `raw-sql` is what this machine makes
 * of that many more instructions per first call. Pads every request its handler runs: read it on
 * first calls only.
 */
import { Module, UseInterceptors } from '@nestjs/common';
import { benchController, createPool, insertPayment, serve } from './common.js';
import { RawIdempotencyInterceptor } from './raw-interceptor.js';

const pool = createPool();
const interceptor = new RawIdempotencyInterceptor(pool);
const rounds = Number(process.env.BENCH_PAD ?? 80);
let sink = 0;

/** Short-lived strings and objects, as a request's own work makes: kept live only by `sink`. */
function pad(): void {
  for (let i = 0; i < rounds; i++) sink = (sink + JSON.stringify({ i, at: sink }).length) | 0;
}

@Module({
  controllers: [
    benchController(
      (req, amount) => {
        pad();
        return insertPayment(pool, req, amount, 'raw-sql-padded');
      },
      () => UseInterceptors(interceptor),
    ),
  ],
})
class RawSqlPaddedModule {}

await serve(RawSqlPaddedModule, { afterClose: () => pool.end() });
