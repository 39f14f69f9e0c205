/**
 * The layout for large tables: the records table hash-partitioned on the key, the archive
 * range-partitioned by day of `archived_at`. Run these statements on a database without the
 * library's tables, BEFORE the library's migrations (which then find both tables and add the
 * rest: indexes, audit tables, views, columns). PostgreSQL wants every unique constraint of a
 * partitioned table to hold the partition key: the scope's does (`idempotency_key`), the primary
 * keys become (id, idempotency_key) and (id, archived_at).
 */
import { sqlNames } from './idempotency-audit.sql.js';
import { recordColumnsDdl } from './idempotency-keys.sql.js';

export interface PartitionedLayoutOptions {
  /** Hash partitions of the records table. @default 16 */
  hashPartitions?: number;
}

/** The partitioned records table and archive, their hash partitions and the archive's default partition. */
export function idempotencyPartitionedUp(
  tableName = 'idempotency_keys',
  { hashPartitions = 16 }: PartitionedLayoutOptions = {},
): string[] {
  const { records: t, archive, prefix: n } = sqlNames(tableName);
  if (!Number.isInteger(hashPartitions) || hashPartitions < 1) {
    throw new Error(`hashPartitions must be a positive integer, got ${hashPartitions}`);
  }
  return [
    `CREATE TABLE IF NOT EXISTS ${t} (
  id               uuid         NOT NULL DEFAULT gen_random_uuid(),
${recordColumnsDdl(n)},
  PRIMARY KEY (id, idempotency_key)
) PARTITION BY HASH (idempotency_key)`,
    ...Array.from(
      { length: hashPartitions },
      (_, i) =>
        `CREATE TABLE IF NOT EXISTS ${partition(t, `p${i}`)} PARTITION OF ${t}
  FOR VALUES WITH (MODULUS ${hashPartitions}, REMAINDER ${i})`,
    ),
    `CREATE TABLE IF NOT EXISTS ${archive} (
  LIKE ${t},
  archived_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (id, archived_at)
) PARTITION BY RANGE (archived_at)`,
    // Rows of a day without its partition land here; keep it empty by creating days ahead.
    `CREATE TABLE IF NOT EXISTS ${partition(archive, 'default')} PARTITION OF ${archive} DEFAULT`,
  ];
}

/**
 * The archive's partitions for `days` UTC days from `from`: create them ahead (a daily job, or
 * pg_partman), and drop the old ones (`DROP TABLE <archive>_YYYYMMDD`) instead of deleting rows.
 */
export function idempotencyArchivePartitions(
  tableName: string,
  from: Date,
  days: number,
): string[] {
  const { archive } = sqlNames(tableName);
  const start = Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), from.getUTCDate());
  return Array.from({ length: days }, (_, i) => {
    const day = new Date(start + i * 86_400_000).toISOString().slice(0, 10);
    const next = new Date(start + (i + 1) * 86_400_000).toISOString().slice(0, 10);
    return `CREATE TABLE IF NOT EXISTS ${partition(archive, day.replace(/-/g, ''))} PARTITION OF ${archive}
  FOR VALUES FROM ('${day} 00:00:00+00') TO ('${next} 00:00:00+00')`;
  });
}

/** `<table>_<suffix>`, in the table's schema, quoted as the table is. */
function partition(table: string, suffix: string): string {
  return table.endsWith('"') ? `${table.slice(0, -1)}_${suffix}"` : `${table}_${suffix}`;
}
