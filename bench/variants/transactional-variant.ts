/**
 * What the transactional variants share: the library with `@Idempotent({ transactional })`, the
 * handler writing through the transaction the library hands it, when it hands one. The
 * `x-bench-tx` header tells the runner whether it did, so a library without the option is
 * detected at run time and skipped.
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
  libraryPool,
  optionsFromEnv,
  type Queryable,
  serve,
} from './common.js';

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

/**
 * `source: 'dataSource'` = `forRoot({ dataSource })` (TypeORM, `idem.manager` an EntityManager);
 * `'pool'` = `forRoot({ pool })` on the bench's own pg pool (`idem.manager` a pg PoolClient).
 */
export async function serveTransactionalVariant(
  variant: string,
  transactional: unknown,
  source: 'dataSource' | 'pool' = 'dataSource',
): Promise<void> {
  const { storage, pool, close } =
    source === 'pool' ? await libraryPool() : await libraryDataSource();
  const options = { transactional } as unknown as IdempotentOptions;

  async function insert(req: BenchRequest, amount: number): Promise<string> {
    const tx = transactionOf(req);
    req.res?.setHeader('x-bench-tx', tx ? '1' : '0');
    return insertPayment(tx ?? pool, req, amount, variant);
  }

  @Module({
    imports: [IdempotencyModule.forRoot({ ...storage, ...optionsFromEnv() })],
    controllers: [benchController(insert, () => Idempotent(options))],
  })
  class TransactionalVariant {}

  await serve(TransactionalVariant, { afterClose: close });
}
