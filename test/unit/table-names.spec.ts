import { describe, expect, it } from '@jest/globals';
import { quoteTable } from '../../lib/store/postgres/idempotency.sql.js';
import { RECORD_COLUMNS, tableNames } from '../../lib/store/postgres/table-names.js';
import { idempotencySchema, idempotencySchemaDown } from '../../migrations/index.js';

describe('tableNames (every name derived from tableName)', () => {
  it('derives the audit tables and views, quoted when asked, and the index prefix', () => {
    const names = tableNames('billing.idem', quoteTable);
    expect(names).toMatchObject({
      records: '"billing"."idem"',
      archive: '"billing"."idem_archive"',
      replays: '"billing"."idem_replays"',
      cleanupRuns: '"billing"."idem_cleanup_runs"',
      views: { all: '"billing"."idem_all"', stuckClaims: '"billing"."idem_stuck_claims"' },
      prefix: 'idem',
    });
    expect(tableNames('idempotency_keys').archive).toBe('idempotency_keys_archive');
  });

  it('is where up and down statements of a custom table take their names from', () => {
    const { views, ...tables } = tableNames('billing.idem', quoteTable);
    const down = idempotencySchemaDown('billing.idem').join('\n');
    for (const name of [...Object.values(views), tables.records, tables.archive, tables.replays]) {
      expect(down).toContain(name);
    }
    expect(down).not.toContain('idempotency_keys');
    expect(idempotencySchema('billing.idem').join('\n')).not.toContain('idempotency_keys');
    expect(RECORD_COLUMNS).toContain('response_digest');
  });
});
