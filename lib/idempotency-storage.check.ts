import type { IdempotencyModuleOptions } from './interfaces/idempotency-module-options.interface.js';

const STORAGE = ['pool', 'dataSource', 'store'] as const;

/**
 * Exactly one of `pool`, `dataSource` and `store` says where records live: none cannot work, and
 * two would leave one of them silently unused (a second pool next to the app's own, say).
 */
export function checkStorage(options: IdempotencyModuleOptions | undefined): void {
  const given = STORAGE.filter((name) => options?.[name] !== undefined && options[name] !== null);
  if (given.length === 0) {
    throw new Error(
      'nestjs-pg-idempotency: the `pool` option (your pg.Pool) or the `dataSource` option (a TypeORM DataSource) is required, or a `store` in place of the PostgreSQL one',
    );
  }
  if (given.length > 1) {
    throw new Error(
      `nestjs-pg-idempotency: give exactly one of the options \`pool\`, \`dataSource\` and \`store\`, got ${given.map((n) => `\`${n}\``).join(' and ')}`,
    );
  }
}
