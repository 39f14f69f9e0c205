import { quoteTable } from './idempotency.sql.js';
import type { DeadlinePool } from './pg-deadline.js';
import { tableNames } from './table-names.js';

/**
 * Whether the records table has what a claim's `ON CONFLICT (idempotency_key, endpoint, user_id)`
 * needs: a valid, non-partial unique index on exactly those columns. On a partitioned table the
 * parent's index counts; it is valid only once every partition has its own attached.
 */
const SCOPE_UNIQUE = `SELECT c.relkind = 'p' AS partitioned,
       EXISTS (SELECT 1 FROM pg_catalog.pg_index i
                WHERE i.indrelid = c.oid AND i.indisunique AND i.indisvalid
                  AND i.indpred IS NULL AND i.indexprs IS NULL AND i.indnatts = 3
                  AND (SELECT array_agg(a.attname::text ORDER BY a.attname)
                         FROM pg_catalog.pg_attribute a
                        WHERE a.attrelid = c.oid AND a.attnum = ANY (i.indkey::int2[]))
                      = ARRAY['endpoint', 'idempotency_key', 'user_id']) AS scope_unique
  FROM pg_catalog.pg_class c WHERE c.oid = to_regclass($1)`;

/** What is wrong with the scope's uniqueness, with the fix; null when claims can work. */
export async function scopeUniqueProblem(
  pool: Pick<DeadlinePool, 'query'>,
  tableName: string,
): Promise<string | null> {
  const { records, prefix } = tableNames(tableName, quoteTable);
  const { rows } = await pool.query({ text: SCOPE_UNIQUE, values: [records] });
  const row = rows[0] as { partitioned: boolean; scope_unique: boolean } | undefined;
  if (!row || row.scope_unique) return null;
  const partitioned = row.partitioned
    ? ' On a partitioned table the constraint must hold the partition key (partition by hash of idempotency_key), and an index made ON ONLY the parent needs every partition index attached.'
    : '';
  return `nestjs-pg-idempotency: ${records} has no valid unique constraint on (idempotency_key, endpoint, user_id), so claims (INSERT ... ON CONFLICT) would fail. To fix, ALTER TABLE ${records} ADD CONSTRAINT uq_${prefix}_scope UNIQUE (idempotency_key, endpoint, user_id).${partitioned}`;
}
