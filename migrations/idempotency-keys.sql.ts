/**
 * The schema, once: the TypeORM migration runs these statements and
 * `migrations/001_idempotency_keys.sql` is generated from them (`npm run sql:generate`).
 * Every statement is safe to run twice.
 */
import { sqlNames } from './idempotency-audit.sql.js';

/** The statements for a table of another name (the module's `tableName` option), e.g. `billing.idempotency_keys`. */
/**
 * The records table's columns after `id`, and its status check: shared by the plain table and
 * the partitioned layout (`idempotencyPartitionedUp`).
 */
export function recordColumnsDdl(n: string): string {
  return `  idempotency_key  varchar(255) NOT NULL,
  endpoint         varchar(255) NOT NULL,
  user_id          text         NOT NULL DEFAULT '',
  request_hash     char(64)     NOT NULL,
  status           varchar(20)  NOT NULL DEFAULT 'in_progress'
                   CONSTRAINT ${n}_status_check CHECK (status IN ('in_progress', 'completed')),
  owner_token      uuid,
  locked_until     timestamptz,
  status_code      smallint,
  response_headers jsonb,
  response_body    jsonb,
  response_raw     bytea,
  transaction_id   varchar(255),
  replay_count     integer      NOT NULL DEFAULT 0,
  last_replayed_at timestamptz,
  created_at       timestamptz  NOT NULL DEFAULT now(),
  completed_at     timestamptz,
  expires_at       timestamptz  NOT NULL DEFAULT now() + interval '24 hours',
  CONSTRAINT uq_${n}_scope UNIQUE (idempotency_key, endpoint, user_id)`;
}

/** The statements for a table of another name (the module's `tableName` option), e.g. `billing.idempotency_keys`. */
export function idempotencyKeysUp(tableName = 'idempotency_keys'): string[] {
  const { records: t, prefix: n } = sqlNames(tableName);
  return [
    `CREATE TABLE IF NOT EXISTS ${t} (
  id               uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
${recordColumnsDdl(n)}
)`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_expires_at ON ${t} (expires_at)`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_created_at ON ${t} (created_at)`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_transaction_id ON ${t} (transaction_id) WHERE transaction_id IS NOT NULL`,
    `CREATE INDEX IF NOT EXISTS idx_${n}_in_progress ON ${t} (locked_until) WHERE status = 'in_progress'`,
    `COMMENT ON TABLE ${t} IS 'nestjs-pg-idempotency: one row per (idempotency_key, endpoint, user_id); audit trail of deduplicated operations'`,
  ];
}

export const IDEMPOTENCY_KEYS_UP = idempotencyKeysUp();

/** Drops the records table (run `idempotencyAuditDown` first: its views depend on it). */
export function idempotencyKeysDown(tableName = 'idempotency_keys'): string[] {
  return [`DROP TABLE IF EXISTS ${sqlNames(tableName).records}`];
}

export const IDEMPOTENCY_KEYS_DOWN = idempotencyKeysDown();

/** Renders statements as a plain `.sql` file for teams that run migrations by hand. */
export function renderSqlFile(title: string, statements: readonly string[]): string {
  return [
    `-- nestjs-pg-idempotency: ${title} (generated from migrations/*.sql.ts; do not edit)`,
    '-- Safe to run more than once.',
    ...statements.map((statement) => `${statement};`),
    '',
  ].join('\n\n');
}
