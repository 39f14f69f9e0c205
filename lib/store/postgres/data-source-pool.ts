import type { DataSource } from 'typeorm';
import type { IdempotencyPool } from '../../interfaces/idempotency-pool.interface.js';

/** A TypeORM DataSource, told from a pool without importing TypeORM. */
export function isDataSource(source: unknown): source is DataSource {
  const s = source as Partial<DataSource> | null;
  return typeof s?.createQueryRunner === 'function' && typeof s.options === 'object';
}

/** The pg pool of a PostgreSQL DataSource: undefined until it is initialized. */
export function dataSourcePool(dataSource: DataSource): () => IdempotencyPool | undefined {
  if (dataSource.options.type !== 'postgres') {
    throw new Error(
      `nestjs-pg-idempotency needs a PostgreSQL DataSource, got "${dataSource.options.type}"`,
    );
  }
  return () => (dataSource.driver as unknown as { master?: IdempotencyPool } | undefined)?.master;
}

/** The pool size a DataSource will have, before it is initialized (pg's default 10). */
export function dataSourcePoolMax(dataSource: DataSource): number {
  const options = dataSource.options as { poolSize?: number; extra?: { max?: number } };
  return options.extra?.max ?? options.poolSize ?? 10;
}
