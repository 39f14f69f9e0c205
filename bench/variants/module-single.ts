/**
 * This library with `@Idempotent({ transactional: 'single' })` (single-commit). The handler writes through the
 * transaction the library hands it, when it hands one; the `x-bench-tx` header tells the runner
 * whether it did, so a library without the option is detected at run time and skipped.
 */
import { Module } from '@nestjs/common';
import {
  getIdempotencyContext,
  Idempotent,
  IdempotencyModule,
  type IdempotentOptions,
} from '../../lib/index.js';
import {
  type BenchRequest,
  benchController,
  insertPayment,
  libraryDataSource,
  type Queryable,
  serve,
} from './common.js';

const TRANSACTIONAL = { transactional: 'single' } as unknown as IdempotentOptions;

const { dataSource, pool } = await libraryDataSource();

/** The transaction handle on the request's idempotency context, under whichever name it has. */
function transactionOf(req: BenchRequest): Queryable | undefined {
  const ctx = getIdempotencyContext(req) as unknown as Record<string, unknown> | undefined;
  if (!ctx) return undefined;
  for (const name of ['manager', 'entityManager', 'queryRunner', 'transaction']) {
    const candidate = ctx[name] as Partial<Queryable> | undefined;
    if (typeof candidate?.query === 'function') return candidate as Queryable;
  }
  return undefined;
}

async function insert(req: BenchRequest, amount: number): Promise<string> {
  const tx = transactionOf(req);
  req.res?.setHeader('x-bench-tx', tx ? '1' : '0');
  return insertPayment(tx ?? pool, req, amount, 'module-single');
}

@Module({
  imports: [IdempotencyModule.forRoot({ dataSource })],
  controllers: [benchController(insert, () => Idempotent(TRANSACTIONAL))],
})
class ModuleSingleVariant {}

await serve(ModuleSingleVariant, { afterClose: () => dataSource.destroy() });
