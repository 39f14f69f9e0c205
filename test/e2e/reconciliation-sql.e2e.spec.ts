import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFile } from 'node:fs/promises';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { parseNamedQueries } from '../fixtures/named-queries.js';

/** The package's `sql/reconciliation.sql` (issue 16.3): every query runs as shipped. */
describe('sql/reconciliation.sql', () => {
  let db: MigratedDatabase;
  let queries: Record<string, string>;
  const q = (sql: string, params: unknown[] = []) => db.dataSource.query(sql, params);

  beforeAll(async () => {
    queries = parseNamedQueries(
      await readFile(new URL('../../sql/reconciliation.sql', import.meta.url), 'utf8'),
    );
    db = await createMigratedDatabase('recon_sql');
    // The ledger the templates read as shipped.
    await q(`CREATE TABLE payments (id text PRIMARY KEY, created_at timestamptz NOT NULL)`);
    const yesterday = `date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '14 hours'`;
    await q(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, status_code,
                                     transaction_id, created_at, completed_at, expires_at)
       VALUES ('k1', 'POST /payments', repeat('a', 64), 'completed', 201, 'pay_1', ${yesterday}, ${yesterday}, now() + interval '1 day'),
              ('k2', 'POST /payments', repeat('a', 64), 'completed', 201, 'pay_ghost', ${yesterday}, ${yesterday}, now() + interval '1 day'),
              ('k3', 'POST /payments', repeat('a', 64), 'completed', 402, NULL, ${yesterday}, ${yesterday}, now() + interval '1 day')`,
    );
    await q(`INSERT INTO payments VALUES ('pay_1', ${yesterday}), ('pay_orphan', ${yesterday})`);
    await q(
      `INSERT INTO idempotency_keys_replays (record_id, replayed_at, first_replayed_at, expires_at, replay_count)
       SELECT id, ${yesterday}, ${yesterday}, expires_at, 2 FROM idempotency_keys WHERE idempotency_key = 'k1'`,
    );
    await q(
      `INSERT INTO idempotency_keys_refusals (record_id, kind, refusal_count, first_refused_at, refused_at, expires_at)
       SELECT id, 'in_progress', 3, ${yesterday}, ${yesterday}, expires_at FROM idempotency_keys WHERE idempotency_key = 'k1'`,
    );
  });
  afterAll(async () => db?.drop());

  it('names its queries', () => {
    expect(Object.keys(queries)).toEqual([
      'daily_report',
      'failures_daily',
      'deduplications_yesterday',
      'conflicts_yesterday',
      'stuck_claims',
      'ledger_without_record',
      'records_missing_from_ledger',
    ]);
  });

  it('reports closed days, deduplications and conflicts from the views', async () => {
    expect(await q(queries.daily_report)).toEqual([
      expect.objectContaining({ created: 3, completed: 3, replayed: 2, conflicts: 3 }),
    ]);
    expect(await q(queries.failures_daily)).toEqual([
      expect.objectContaining({ endpoint: 'POST /payments', status_code: 402, records: 1 }),
    ]);
    expect(await q(queries.deduplications_yesterday)).toEqual([
      expect.objectContaining({ transaction_id: 'pay_1', replays: 2 }),
    ]);
    expect(await q(queries.conflicts_yesterday)).toEqual([
      expect.objectContaining({ transaction_id: 'pay_1', conflicts: 3, mismatches: 0 }),
    ]);
    expect(await q(queries.stuck_claims)).toEqual([]);
  });

  it('lists exactly the ledger rows and records that do not match', async () => {
    expect(await q(queries.ledger_without_record)).toEqual([
      expect.objectContaining({ transaction_id: 'pay_orphan' }),
    ]);
    expect(
      (await q(queries.records_missing_from_ledger)).map((r: Record<string, unknown>) => [
        r.idempotency_key,
        r.problem,
      ]),
    ).toEqual([['k2', 'transaction_not_in_ledger']]);
  });
});
