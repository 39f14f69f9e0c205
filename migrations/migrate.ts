import { quoteTable } from '../lib/store/postgres/idempotency.sql.js';
import { idempotencyKeysUp } from './idempotency-keys.sql.js';
import { idempotencyAuditUp } from './idempotency-audit.sql.js';
import { responseProtectionUp } from './idempotency-response-protection.sql.js';
import { replayTallyUp } from './idempotency-replay-tally.sql.js';
import { financeHistoryUp } from './idempotency-finance-history.sql.js';
import { recoveryPointsUp } from './idempotency-recovery-points.sql.js';

/** The plain SQL files of `migrations/`, in order: each one's statements for a table name. */
export const IDEMPOTENCY_SQL_MIGRATIONS: readonly (readonly [
  string,
  (tableName: string) => string[],
])[] = [
  ['001_idempotency_keys.sql', idempotencyKeysUp],
  ['002_idempotency_audit.sql', idempotencyAuditUp],
  ['003_response_protection.sql', responseProtectionUp],
  ['004_replay_tally.sql', replayTallyUp],
  ['005_finance_history.sql', financeHistoryUp],
  ['006_recovery_points.sql', recoveryPointsUp],
];

/** A pg pool (`pg.Pool`), as far as `migrate` needs it. */
export interface MigrationPool {
  connect(): Promise<{
    query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
    release(err?: Error | boolean): void;
  }>;
}

export interface MigrateOptions {
  /**
   * The records table, as the module's `tableName` option.
   * @default 'idempotency_keys'
   */
  tableName?: string;
}

/**
 * Applies the library's plain SQL migrations (`migrations/*.sql`) that this database has not had
 * yet, in order, in one transaction, and records them in `<table>_migrations`: for apps without
 * TypeORM migrations. Instances starting together wait for each other (an advisory lock), and a
 * second run applies nothing. Returns the files it applied. On a database migrated otherwise
 * (TypeORM migrations, the SQL files by hand) the first run applies every file again, which
 * changes nothing: each statement is safe to run twice.
 * @example
 * await migrate(pool); // at start-up, before the app listens
 */
export async function migrate(
  pool: MigrationPool,
  options: MigrateOptions = {},
): Promise<string[]> {
  const tableName = options.tableName ?? 'idempotency_keys';
  const ledger = quoteTable(`${tableName}_migrations`);
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query('BEGIN');
    await client.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`${tableName} migrate`]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${ledger} (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const { rows } = await client.query(`SELECT name FROM ${ledger}`);
    const done = new Set(rows.map((r) => r.name));
    for (const [name, statements] of IDEMPOTENCY_SQL_MIGRATIONS) {
      if (done.has(name)) continue;
      for (const statement of statements(tableName)) await client.query(statement);
      await client.query(`INSERT INTO ${ledger} (name) VALUES ($1)`, [name]);
      applied.push(name);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release(err as Error);
    throw err;
  }
  client.release();
  return applied;
}
