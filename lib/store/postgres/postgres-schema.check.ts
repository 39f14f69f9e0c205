import { quoteTable } from './idempotency.sql.js';
import { REQUIRED_COLUMNS, tableNames } from './table-names.js';
import type { DeadlinePool } from './deadline-pool.js';
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

type Missing = { rel: string; col: string; table_exists: boolean }[];

/**
 * What the PostgreSQL store's `checkSchema()` does: rejects when the library's tables are not
 * there or the database cannot serve claims (see `topologyProblems`); resolves with a warning
 * when PostgreSQL does not answer (not a reason to refuse to start).
 */
export async function checkPostgresSchema(
  pool: DeadlinePool,
  tableName: string,
  preparedStatements: boolean,
  clientFactory: () => ClientFactory | undefined,
): Promise<string | undefined> {
  const names = tableNames(tableName, quoteTable);
  const rels: string[] = [];
  const cols: string[] = [];
  for (const [table, columns] of Object.entries(REQUIRED_COLUMNS)) {
    for (const column of columns) {
      rels.push(names[table as keyof typeof REQUIRED_COLUMNS]);
      cols.push(column);
    }
  }
  let missing: Missing;
  let problems: string[] = [];
  try {
    missing = (await pool.query({ text: CHECK, values: [rels, cols] })).rows as never;
    if (missing.length === 0) {
      problems = await topologyProblems(
        pool,
        { quoted: names.records, prefix: names.prefix },
        preparedStatements,
        clientFactory,
      );
    }
  } catch (err) {
    return `Could not check the idempotency tables (${(err as Error).message}); starting anyway: keyed requests answer 503 until PostgreSQL answers`;
  }
  if (missing.length > 0) throw new Error(describeMissing(tableName, missing));
  if (problems.length > 0) {
    throw new Error(
      `nestjs-pg-idempotency: the store cannot work here: ${problems.join(' Also, ')}`,
    );
  }
  return undefined;
}

function describeMissing(tableName: string, missing: Missing): string {
  const tables = [...new Set(missing.filter((m) => !m.table_exists).map((m) => m.rel))];
  const columns = missing.filter((m) => m.table_exists).map((m) => `${m.rel}.${m.col}`);
  const what = [
    tables.length ? `table${tables.length > 1 ? 's' : ''} ${tables.join(', ')}` : '',
    columns.length ? `column${columns.length > 1 ? 's' : ''} ${columns.join(', ')}` : '',
  ].filter(Boolean);
  const fix =
    tableName === 'idempotency_keys'
      ? "add `idempotencyMigrations` from 'nestjs-pg-idempotency/migrations' to your DataSource's `migrations` and run them (e.g. `migrationsRun: true`), or call `migrate(pool)` from 'nestjs-pg-idempotency' at start-up, or run the plain SQL files migrations/001_idempotency_keys.sql to migrations/006_recovery_points.sql in order"
      : `run the statements of \`idempotencySchema(${JSON.stringify(tableName)})\` from 'nestjs-pg-idempotency/migrations' (e.g. in a migration of your own), or call \`migrate(pool, { tableName: ${JSON.stringify(tableName)} })\` from 'nestjs-pg-idempotency'`;
  return `nestjs-pg-idempotency: the database lacks what the idempotency store needs: ${what.join('; ')}. To fix, ${fix}.`;
}
