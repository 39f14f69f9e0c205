import { createHash } from 'node:crypto';
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$/;

/** `schema.table` → `"schema"."table"`, refusing anything but plain identifiers. */
export function quoteTable(tableName: string): string {
  if (!IDENTIFIER.test(tableName)) {
    throw new Error(`nestjs-pg-idempotency: invalid tableName ${JSON.stringify(tableName)}`);
  }
  return tableName
    .split('.')
    .map((part) => `"${part}"`)
    .join('.');
}

/**
 * Every name derived from the records table, and the columns the store's statements use: the
 * one place the library (statements, schema check) and the migrations take them from.
 */
export function tableNames(tableName: string, quote: (name: string) => string = (name) => name) {
  const name = (suffix = '') => quote(`${tableName}${suffix}`);
  return {
    records: name(),
    archive: name('_archive'),
    replays: name('_replays'),
    cleanupRuns: name('_cleanup_runs'),
    /** Daily figures of rows cleanup deleted (migration 5): the views add them to the live rows. */
    rollup: name('_daily_rollup'),
    /** In-progress conflicts and key-reuse mismatches, per record and audit flush (migration 5). */
    refusals: name('_refusals'),
    /** Recovery points of `ctx.step()`, per record and step name (migration 6). */
    steps: name('_steps'),
    /** Reconciliation views (migration 2). */
    views: {
      all: name('_all'),
      deduplications: name('_deduplications'),
      stuckClaims: name('_stuck_claims'),
      failuresDaily: name('_failures_daily'),
      dailySummary: name('_daily_summary'),
      /** Refusals per record and day, and per day (migration 5). */
      conflicts: name('_conflicts'),
      conflictsDaily: name('_conflicts_daily'),
      /** Records that took more than one run or have recovery points (migration 6). */
      recoveries: name('_recoveries'),
    },
    /** Prefix of index and constraint names: the table name without its schema. */
    prefix: tableName.split('.').pop() as string,
  };
}

export type TableNames = ReturnType<typeof tableNames>;

/** The columns of a record, copied column by column into the archive on takeover. */
export const RECORD_COLUMNS = [
  'id',
  'idempotency_key',
  'endpoint',
  'user_id',
  'request_hash',
  'status',
  'status_code',
  'response_headers',
  'response_body',
  'response_raw',
  'transaction_id',
  'replay_count',
  'last_replayed_at',
  'created_at',
  'completed_at',
  'expires_at',
  'locked_until',
  'response_key_id',
  'response_digest',
] as const;

/** Per table (by its key in `tableNames()`), the columns the store reads or writes. */
export const REQUIRED_COLUMNS = {
  records: [...RECORD_COLUMNS, 'owner_token', 'runs'],
  archive: RECORD_COLUMNS,
  replays: ['id', 'record_id', 'replayed_at', 'expires_at', 'replay_count', 'first_replayed_at'],
  cleanupRuns: ['started_at', 'finished_at', 'deleted', 'batches'],
  rollup: ['day', 'kind', 'endpoint', 'status_code', 'n'],
  refusals: ['record_id', 'kind', 'refusal_count', 'first_refused_at', 'refused_at', 'expires_at'],
  steps: [
    'record_id',
    'name',
    'result',
    'result_key_id',
    'run',
    'resumed_count',
    'last_resumed_at',
  ],
} as const;

/** Suffix of the prepared statements' names: one table's statements never collide with another's. */
export function statementSuffix(tableName: string): string {
  return createHash('sha1').update(tableName).digest('hex').slice(0, 8);
}
