import type { DeadlinePool } from './deadline-pool.js';
import { type ClientFactory, probeTransactionPooler } from './transaction-pooler.probe.js';

/** A single-commit claim found its transaction read-only: its record could never be written. */
export function readOnlyTransactionError(): Error {
  return new Error(
    'nestjs-pg-idempotency: the transaction is read-only (a standby, or default_transaction_read_only = on), so the handler was not run: point the DataSource at a read-write primary',
  );
}

/** The columns claims name in `ON CONFLICT`: a unique index on exactly these must exist. */
const SCOPE = ['endpoint', 'idempotency_key', 'user_id'];

/**
 * On a partitioned table the parent's index counts; it is valid only once every partition has its
 * own attached.
 */
const CHECK = `SELECT pg_is_in_recovery() AS standby,
       (SELECT relkind = 'p' FROM pg_catalog.pg_class WHERE oid = to_regclass($1)) AS partitioned,
       current_setting('transaction_read_only') = 'on' AS read_only,
       EXISTS (SELECT 1 FROM pg_catalog.pg_index i
                WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indisvalid
                  AND i.indpred IS NULL AND i.indexprs IS NULL AND i.indnkeyatts = $3
                  AND (SELECT array_agg(a.attname::text ORDER BY a.attname)
                         FROM pg_catalog.pg_attribute a
                        WHERE a.attrelid = i.indrelid
                          AND a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1])) = $2::text[]
              ) AS scope_unique`;

const PARTITIONED =
  ' On a partitioned table the constraint must hold the partition key (partition by hash of idempotency_key), and an index made ON ONLY the parent needs every partition index attached.';

/**
 * What keeps the store from working on this database although its tables are there, each with
 * its fix: a standby or read-only transactions (every claim would fail), no unique index on the
 * scope (`ON CONFLICT` would fail), a transaction pooler with named statements on (statements
 * would fail at random). Empty when none.
 */
export async function topologyProblems(
  pool: DeadlinePool,
  records: { quoted: string; prefix: string },
  preparedStatements: boolean,
  clientFactory: () => ClientFactory | undefined,
): Promise<string[]> {
  const { rows } = await pool.query({
    text: CHECK,
    values: [records.quoted, SCOPE, SCOPE.length],
  });
  const row = rows[0] as {
    standby: boolean;
    read_only: boolean;
    partitioned: boolean;
    scope_unique: boolean;
  };
  const problems: string[] = [];
  if (row.standby) {
    problems.push(
      'the DataSource points at a standby (in recovery, read-only): point it at the primary (the read-write endpoint).',
    );
  } else if (row.read_only) {
    problems.push(
      "transactions are read-only (default_transaction_read_only = on, for the database, the role or the connection's options): point the DataSource at a read-write primary, or turn it off (ALTER ROLE <user> SET default_transaction_read_only = off).",
    );
  }
  if (!row.scope_unique) {
    problems.push(
      `the table ${records.quoted} has no unique index on (idempotency_key, endpoint, user_id), which claims need (INSERT ... ON CONFLICT): restore it, e.g. ALTER TABLE ${records.quoted} ADD CONSTRAINT uq_${records.prefix}_scope UNIQUE (idempotency_key, endpoint, user_id).${row.partitioned ? PARTITIONED : ''}`,
    );
  }
  if (preparedStatements) {
    // A pool that cannot make clients of its own (not a pg.Pool) is not probed.
    const factory = clientFactory();
    const pooler = factory?.Client ? await probeTransactionPooler(factory, pool.timeoutMs) : null;
    if (pooler) problems.push(pooler);
  }
  return problems;
}
