import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { IDEMPOTENCY_STORE } from '../../idempotency.constants.js';
import { IDEMPOTENCY_RESOLVED_OPTIONS } from '../../idempotency-internal.constants.js';
import type { ResolvedIdempotencyOptions } from '../../idempotency.defaults.js';
import { quoteTable } from './idempotency.sql.js';
import { REQUIRED_COLUMNS, tableNames } from './table-names.js';
import type { IdempotencyStore } from '../../interfaces/idempotency-store.interface.js';
import { PostgresIdempotencyStore } from './postgres-idempotency.store.js';
import { topologyProblems } from './topology-check.js';
import type { ClientFactory } from './transaction-pooler.probe.js';

/**
 * One row per required column that is absent; `table_exists` tells a missing table from a column.
 * Ordered as listed: without ORDER BY the anti-join's plan decides, and the message changes.
 */
const CHECK = `SELECT w.rel, w.col, to_regclass(w.rel) IS NOT NULL AS table_exists
  FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w(rel, col, ord)
 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = to_regclass(w.rel) AND a.attname = w.col
                      AND a.attnum > 0 AND NOT a.attisdropped)
 ORDER BY w.ord`;

/**
 * Fails bootstrap when the library's migrations were not run, or the database cannot serve
 * claims (see `topologyProblems`), instead of answering 503 to every keyed request. Runs at
 * `onApplicationBootstrap`, so migrations run by the app at module init are in place. A database that does not answer is not a reason to refuse to start: the app
 * starts with a warning, and keyed requests answer 503 until PostgreSQL is back.
 */
@Injectable()
export class SchemaCheckService implements OnApplicationBootstrap {
  private readonly logger = new Logger('IdempotencySchema');

  constructor(
    @Inject(IDEMPOTENCY_RESOLVED_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyStore,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    // A store bound in place of the PostgreSQL one brings its own storage.
    if (!(this.store instanceof PostgresIdempotencyStore)) return;
    const { dataSource, tableName } = this.store;
    const names = tableNames(tableName, quoteTable);
    const rels: string[] = [];
    const cols: string[] = [];
    for (const [table, columns] of Object.entries(REQUIRED_COLUMNS)) {
      for (const column of columns) {
        rels.push(names[table as keyof typeof REQUIRED_COLUMNS]);
        cols.push(column);
      }
    }
    const pool = this.store.deadlinePool;
    let missing: { rel: string; col: string; table_exists: boolean }[];
    let problems: string[] = [];
    try {
      missing = (await pool.query({ text: CHECK, values: [rels, cols] })).rows as never;
      if (missing.length === 0) {
        problems = await topologyProblems(
          pool,
          { quoted: names.records, prefix: names.prefix },
          this.options.preparedStatements,
          () => (dataSource.driver as unknown as { master: ClientFactory }).master,
        );
      }
    } catch (err) {
      this.logger.warn(
        `Could not check the idempotency tables (${(err as Error).message}); starting anyway: keyed requests answer 503 until PostgreSQL answers`,
      );
      return;
    }
    if (missing.length > 0) throw new Error(describeMissing(tableName, missing));
    if (problems.length > 0) {
      throw new Error(
        `nestjs-pg-idempotency: the store cannot work here: ${problems.join(' Also, ')}`,
      );
    }
  }
}

function describeMissing(
  tableName: string,
  missing: { rel: string; col: string; table_exists: boolean }[],
): string {
  const tables = [...new Set(missing.filter((m) => !m.table_exists).map((m) => m.rel))];
  const columns = missing.filter((m) => m.table_exists).map((m) => `${m.rel}.${m.col}`);
  const what = [
    tables.length ? `table${tables.length > 1 ? 's' : ''} ${tables.join(', ')}` : '',
    columns.length ? `column${columns.length > 1 ? 's' : ''} ${columns.join(', ')}` : '',
  ].filter(Boolean);
  const fix =
    tableName === 'idempotency_keys'
      ? "add `idempotencyMigrations` from 'nestjs-pg-idempotency/migrations' to your DataSource's `migrations` and run them (e.g. `migrationsRun: true`), or run the plain SQL files migrations/001_idempotency_keys.sql to migrations/006_recovery_points.sql in order"
      : `run the statements of \`idempotencySchema(${JSON.stringify(tableName)})\` from 'nestjs-pg-idempotency/migrations' (e.g. in a migration of your own)`;
  return `nestjs-pg-idempotency: the database lacks what the idempotency store needs: ${what.join('; ')}. To fix, ${fix}.`;
}
