import {
  type DynamicModule,
  Inject,
  Logger,
  Module,
  type OnApplicationShutdown,
} from '@nestjs/common';
import pg from 'pg';
import { IdempotencyModule, migrate } from '../../../lib/index.js';
import { idempotencySettings, SAMPLE_APPLICATION_NAME } from '../idempotency.settings.js';
import { Ledger } from '../payments/ledger.js';
import type { SampleAppOptions } from '../sample.options.js';
import { sampleSchemaSql } from '../sample-schema.js';
import { PgLedger } from './pg-ledger.js';
import { logStatements } from './sql-log.js';

export const PG_POOL = Symbol('PG_POOL');

/** The app's one pg pool, migrated before anything uses it, and ended when the app closes. */
async function openPool(options: SampleAppOptions): Promise<pg.Pool> {
  const logger = new Logger('PgPool');
  const pool = new pg.Pool({
    connectionString: options.databaseUrl,
    max: 10,
    application_name: SAMPLE_APPLICATION_NAME,
  });
  pool.on('error', (error) => logger.warn(`idle connection failed: ${error.message}`));
  if (options.logSql) logStatements(pool, logger);
  try {
    await migrate(pool); // the library's tables
    await pool.query(await sampleSchemaSql()); // then the sample's own
  } catch (error) {
    await pool.end();
    throw error;
  }
  return pool;
}

@Module({})
class PgPoolModule implements OnApplicationShutdown {
  constructor(@Inject(PG_POOL) private readonly pool: pg.Pool) {}

  /** After the library's own shutdown work (it writes in `beforeApplicationShutdown`). */
  async onApplicationShutdown(): Promise<void> {
    await this.pool.end();
  }
}

/**
 * Plain `pg`, the default: the idempotency store runs on the app's own pool (no second pool, no
 * TypeORM), and a transactional handler's `idem.manager` is a PgLedger on the store's
 * `TransactionClient`: its writes commit with the idempotency record.
 */
@Module({})
export class PgDatabaseModule {
  static forRoot(options: SampleAppOptions): DynamicModule {
    const poolModule: DynamicModule = {
      module: PgPoolModule,
      providers: [{ provide: PG_POOL, useFactory: () => openPool(options) }],
      exports: [PG_POOL],
    };
    return {
      module: PgDatabaseModule,
      global: true,
      imports: [
        poolModule,
        IdempotencyModule.forRootAsync({
          imports: [poolModule],
          inject: [PG_POOL],
          useFactory: (pool: pg.Pool) => ({
            pool,
            transactions: (client) => new PgLedger(client),
            ...idempotencySettings(options),
          }),
        }),
      ],
      providers: [{ provide: Ledger, inject: [PG_POOL], useFactory: (pool) => new PgLedger(pool) }],
      exports: [Ledger],
    };
  }
}
