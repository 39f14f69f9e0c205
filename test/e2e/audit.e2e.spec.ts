import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { ReplayAuditService } from '../../lib/execution/replay-audit.service.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { startFixtureApp, type FixtureApp } from '../fixtures/payments.fixture.js';

describe('audit trail and reconciliation views', () => {
  let db: MigratedDatabase;
  let f: FixtureApp;
  const flush = () => f.app.get(ReplayAuditService).flush();
  const q = (sql: string, params: unknown[] = []) => db.dataSource.query(sql, params);

  beforeAll(async () => {
    db = await createMigratedDatabase('audit');
    f = await startFixtureApp({
      platform: 'express',
      dataSource: db.dataSource,
      options: { replayAuditFlushMs: 60_000, replayCache: false },
    });
  });
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  });

  it('records every replay (batched) with the transaction it deduplicated', async () => {
    const key = randomUUID();
    const first = await send(f.url, '/charges', { key, body: { amount: 10 } });
    for (let i = 0; i < 3; i++) await send(f.url, '/charges', { key, body: { amount: 10 } });
    const [before] = await db.records('idempotency_key = $1', [key]);
    expect(before.replay_count).toBe(0); // nothing written per replay...
    await flush(); // ...until the batch is flushed
    const [row] = await db.records('idempotency_key = $1', [key]);
    expect(row.replay_count).toBe(3);
    expect(row.last_replayed_at).not.toBeNull();
    // One row for the record in this flush, not one per replay: it carries the count.
    const rows = await q(
      `SELECT replay_count, first_replayed_at <= replayed_at AS ordered, replayed_at = $2 AS last
         FROM idempotency_keys_replays WHERE record_id = $1`,
      [row.id, row.last_replayed_at],
    );
    expect(rows).toEqual([{ replay_count: 3, ordered: true, last: true }]);

    const today = (await q(`SELECT (now() AT TIME ZONE 'UTC')::date::text AS d`))[0].d;
    const dedup = await q(
      `SELECT day::text, transaction_id, user_id, endpoint, replays FROM idempotency_keys_deduplications
        WHERE day >= $1::date AND day < $1::date + 1 AND record_id = $2`,
      [today, row.id],
    );
    expect(dedup).toEqual([
      {
        day: today,
        transaction_id: first.json().id,
        user_id: '',
        endpoint: 'POST /charges',
        replays: 3,
      },
    ]);
  });

  it('writes one row per record per flush, and the views sum rows written before migration 4 as one replay each', async () => {
    const key = randomUUID();
    await send(f.url, '/charges', { key, body: { amount: 15 } });
    for (let i = 0; i < 2; i++) await send(f.url, '/charges', { key, body: { amount: 15 } });
    await flush();
    await send(f.url, '/charges', { key, body: { amount: 15 } });
    await flush();
    const [row] = await db.records('idempotency_key = $1', [key]);
    expect(row.replay_count).toBe(3);
    // An old per-replay row: no count, no first time given.
    await q(
      `INSERT INTO idempotency_keys_replays (record_id, replayed_at, expires_at) VALUES ($1, now(), now() + interval '1 day')`,
      [row.id],
    );
    expect(
      await q(
        `SELECT replay_count FROM idempotency_keys_replays WHERE record_id = $1 ORDER BY id`,
        [row.id],
      ),
    ).toEqual([{ replay_count: 2 }, { replay_count: 1 }, { replay_count: 1 }]);
    expect(
      await q(
        `SELECT replays, first_replayed_at <= last_replayed_at AS ordered
           FROM idempotency_keys_deduplications WHERE record_id = $1`,
        [row.id],
      ),
    ).toEqual([{ replays: 4, ordered: true }]);
  });

  it('archives the old record when an expired key is taken over, keeping its transaction id', async () => {
    const key = randomUUID();
    const first = await send(f.url, '/charges', { key, body: { amount: 20 } });
    await send(f.url, '/charges', { key, body: { amount: 20 } });
    await flush();
    const [old] = await db.records('idempotency_key = $1', [key]);
    await q(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, [
      old.id,
    ]);
    const second = await send(f.url, '/charges', { key, body: { amount: 20 } });
    expect(second.json().id).not.toBe(first.json().id);

    const [live] = await db.records('idempotency_key = $1', [key]);
    expect(live.id).not.toBe(old.id);
    expect(live.transaction_id).toBe(second.json().id);
    const archived = await q(
      `SELECT id, transaction_id, replay_count FROM idempotency_keys_archive WHERE idempotency_key = $1`,
      [key],
    );
    expect(archived).toEqual([{ id: old.id, transaction_id: first.json().id, replay_count: 1 }]);
    const all = await q(
      `SELECT transaction_id, archived_at IS NOT NULL AS archived FROM idempotency_keys_all WHERE idempotency_key = $1 ORDER BY created_at`,
      [key],
    );
    expect(all).toEqual([
      { transaction_id: first.json().id, archived: true },
      { transaction_id: second.json().id, archived: false },
    ]);
    // The replay of the first operation stays attributed to it.
    expect(
      await q(`SELECT replays FROM idempotency_keys_deduplications WHERE record_id = $1`, [old.id]),
    ).toEqual([{ replays: 1 }]);
  });

  it('lists claims stuck in progress past their lease', async () => {
    const key = randomUUID();
    await q(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, locked_until, expires_at)
       VALUES ($1, 'POST /charges', repeat('a', 64), now() - interval '5 minutes', now() + interval '1 day')`,
      [key],
    );
    const stuck = await q(
      `SELECT idempotency_key, stuck_for >= interval '5 minutes' AS late FROM idempotency_keys_stuck_claims`,
    );
    expect(stuck).toEqual([{ idempotency_key: key, late: true }]);
  });

  it('counts stored failures per endpoint and day, and summarizes each day', async () => {
    await q(
      'TRUNCATE idempotency_keys, idempotency_keys_archive, idempotency_keys_replays, idempotency_keys_cleanup_runs, idempotency_keys_daily_rollup',
    );
    const declined = randomUUID();
    await send(f.url, '/declined', { key: declined, body: {} });
    await send(f.url, '/declined', { key: declined, body: {} });
    await send(f.url, '/declined', { key: randomUUID(), body: {} });
    await send(f.url, '/charges', { key: randomUUID(), body: {} });
    await flush();
    const today = (await q(`SELECT (now() AT TIME ZONE 'UTC')::date::text AS d`))[0].d;
    expect(
      await q(
        `SELECT day::text, endpoint, status_code, records FROM idempotency_keys_failures_daily`,
      ),
    ).toEqual([{ day: today, endpoint: 'POST /declined', status_code: 402, records: 2 }]);
    // One row past the default retention (400 days after expiry) that cleanup then deletes shows
    // up as deleted, and today's figures keep counting it as created.
    await q(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, expires_at)
       VALUES ('old', 'POST /charges', repeat('a', 64), 'completed', now() - interval '401 days')`,
    );
    await f.app.get((await import('../../lib/index.js')).IdempotencyCleanupService).run();
    expect(
      await q(
        `SELECT day::text, created, completed, replayed, expired, deleted FROM idempotency_keys_daily_summary WHERE day = $1::date`,
        [today],
      ),
    ).toEqual([{ day: today, created: 4, completed: 3, replayed: 1, expired: 0, deleted: 1 }]);
  });
});
