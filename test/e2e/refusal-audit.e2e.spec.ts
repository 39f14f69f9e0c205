import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { ReplayAuditService } from '../../lib/execution/replay-audit.service.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import {
  SINGLE_EXECUTIONS_TABLE,
  startFixtureApp,
  type FixtureApp,
} from '../fixtures/payments.fixture.js';

/** In-flight duplicates and key-reuse mismatches are counted per record and day (issue 16.2). */
describe('refusal audit', () => {
  let db: MigratedDatabase;
  let f: FixtureApp;
  const q = (sql: string, params: unknown[] = []) => db.dataSource.query(sql, params);
  const flush = () => f.app.get(ReplayAuditService).flush();
  const today = async () => (await q(`SELECT (now() AT TIME ZONE 'UTC')::date::text AS d`))[0].d;

  beforeAll(async () => {
    db = await createMigratedDatabase('refusals');
    await q(SINGLE_EXECUTIONS_TABLE);
    f = await startFixtureApp({
      platform: 'express',
      dataSource: db.dataSource,
      singleCommit: true,
      options: { replayAuditFlushMs: 60_000, replayCache: false },
    });
  });
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  });
  beforeEach(async () => q('TRUNCATE idempotency_keys_refusals'));

  async function until(check: () => Promise<boolean> | boolean) {
    const deadline = Date.now() + 10_000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('condition not met in 10 s');
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it('counts 409 in-progress duplicates and mismatches against the record they hit', async () => {
    const key = randomUUID();
    const body = { ms: 1_500, key };
    const first = send(f.url, '/slow', { key, body });
    await until(async () => (await db.records('idempotency_key = $1', [key])).length === 1);
    const duplicates = await Promise.all([1, 2, 3].map(() => send(f.url, '/slow', { key, body })));
    expect(duplicates.map((r) => [r.status, r.json().code])).toEqual(
      Array(3).fill([409, 'request_in_progress']),
    );
    const other = { ms: 1, key };
    expect((await send(f.url, '/slow', { key, body: other })).json().code).toBe(
      'idempotency_key_reused_with_different_params',
    );
    expect((await first).status).toBe(201);
    // After completion too: the same key with another body.
    expect((await send(f.url, '/slow', { key, body: other })).status).toBe(409);
    await flush();

    const [record] = await db.records('idempotency_key = $1', [key]);
    const d = await today();
    expect(
      await q(
        `SELECT day::text, idempotency_key, endpoint, conflicts, mismatches, not_replayable
           FROM idempotency_keys_conflicts WHERE record_id = $1`,
        [record.id],
      ),
    ).toEqual([
      {
        day: d,
        idempotency_key: key,
        endpoint: 'POST /slow',
        conflicts: 3,
        mismatches: 2,
        not_replayable: 0,
      },
    ]);
    expect(
      await q(`SELECT day::text, conflicts, mismatches FROM idempotency_keys_conflicts_daily`),
    ).toEqual([{ day: d, conflicts: 3, mismatches: 2 }]);
  });

  it('counts duplicates of a single-commit claim that has no committed record yet', async () => {
    const key = randomUUID();
    const body = { ms: 1_500, key };
    const first = send(f.url, '/single/slow', { key, body });
    await until(() => f.exec.count('single-slow', key) === 1);
    const duplicates = await Promise.all(
      [1, 2].map(() => send(f.url, '/single/slow', { key, body })),
    );
    expect(duplicates.map((r) => r.status)).toEqual([409, 409]);
    expect((await first).status).toBe(201);
    await flush();
    expect(await q(`SELECT record_id, conflicts FROM idempotency_keys_conflicts`)).toEqual([
      { record_id: null, conflicts: 2 },
    ]);
    expect(await q(`SELECT conflicts FROM idempotency_keys_conflicts_daily`)).toEqual([
      { conflicts: 2 },
    ]);
  });
});
