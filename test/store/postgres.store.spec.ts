import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { PostgresIdempotencyStore, type Completion } from '../../lib/index.js';
import { tableNames } from '../../lib/store/postgres/table-names.js';
import { idempotencyStoreContract } from '../../lib/testing/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

const t = tableNames('idempotency_keys');
let db: MigratedDatabase;
beforeAll(async () => {
  db = await createMigratedDatabase('store_contract');
});
afterAll(async () => db?.drop());

/** The store reads the database clock: moving time forward is moving every timestamp back. */
async function advance(seconds: number): Promise<void> {
  const by = `make_interval(secs => ${Number(seconds)})`;
  await db.dataSource.query(
    `UPDATE ${t.records} SET locked_until = locked_until - ${by}, expires_at = expires_at - ${by},
            created_at = created_at - ${by}, completed_at = completed_at - ${by}`,
  );
  await db.dataSource.query(`UPDATE ${t.archive} SET expires_at = expires_at - ${by}`);
  await db.dataSource.query(`UPDATE ${t.replays} SET expires_at = expires_at - ${by}`);
}

idempotencyStoreContract(async () => {
  await db.dataSource.query(`TRUNCATE ${t.records}, ${t.archive}, ${t.replays}, ${t.cleanupRuns}`);
  return { store: new PostgresIdempotencyStore(db.dataSource, 'idempotency_keys'), advance };
});

/** The execution hands over the wire response; which columns it fills is the store's choice. */
describe('PostgresIdempotencyStore columns', () => {
  const complete = async (body: string, over: Partial<Completion> = {}) => {
    const store = new PostgresIdempotencyStore(db.dataSource, 'idempotency_keys');
    const outcome = await store.claim({
      key: randomUUID(),
      endpoint: 'POST /x',
      userId: '',
      requestHash: 'a'.repeat(64),
      ttlSeconds: 60,
      leaseSeconds: 60,
    });
    if (outcome.type !== 'claimed') throw new Error(outcome.type);
    const c = { statusCode: 201, headers: { 'content-type': 'application/json' } };
    await store.complete(outcome.lease, {
      ...c,
      body: Buffer.from(body),
      transactionId: null,
      ttlSeconds: 60,
      ...over,
    });
    const [row] = await db.records('id = $1', [outcome.lease.id]);
    return { json: row.response_body, raw: row.response_raw.toString() };
  };

  it('keeps a queryable jsonb copy of a JSON body that jsonb can hold', async () => {
    expect(await complete('{"a":1}')).toEqual({ json: { a: 1 }, raw: '{"a":1}' });
  });

  it('keeps only the bytes when jsonb cannot take the body, or when asked to', async () => {
    expect(await complete('{"a":"\\u0000"}')).toEqual({ json: null, raw: '{"a":"\\u0000"}' });
    expect(await complete('{"a":1}', { bytesOnly: true })).toEqual({ json: null, raw: '{"a":1}' });
    const text = await complete('{"a":1}', { headers: { 'content-type': 'text/plain' } });
    expect(text.json).toBeNull();
  });
});

describe('PostgresIdempotencyStore replay audit rows', () => {
  const store = () => new PostgresIdempotencyStore(db.dataSource, 'idempotency_keys');
  const completed = async () => {
    const s = store();
    const outcome = await s.claim({
      key: randomUUID(),
      endpoint: 'POST /audit',
      userId: '',
      requestHash: 'b'.repeat(64),
      ttlSeconds: 60,
      leaseSeconds: 60,
    });
    if (outcome.type !== 'claimed') throw new Error(outcome.type);
    const done = await s.complete(outcome.lease, {
      statusCode: 201,
      headers: {},
      body: Buffer.from('{}'),
      transactionId: null,
      ttlSeconds: 60,
    });
    return { id: outcome.lease.id, expiresAt: done!.expiresAt };
  };
  const rows = (id: string) =>
    db.dataSource.query(
      `SELECT expires_at, replay_count,
              round(extract(epoch FROM replayed_at - first_replayed_at) * 1000) AS span_ms
         FROM ${t.replays} WHERE record_id = $1`,
      [id],
    ) as Promise<{ expires_at: Date; replay_count: number; span_ms: string }[]>;

  it("writes each record's expiry and count, and its first and last replay a span apart", async () => {
    const [a, b] = [await completed(), await completed()];
    await store().recordReplays([
      { ...a, recordId: a.id, count: 3, firstReplayedMsAgo: 1500.7, replayedMsAgo: 250.2 },
      { ...b, recordId: b.id, count: 1, firstReplayedMsAgo: 10.4, replayedMsAgo: 10.4 },
    ]);
    const [rowA] = await rows(a.id);
    expect(rowA.expires_at.getTime()).toBe(a.expiresAt.getTime());
    expect(rowA.replay_count).toBe(3);
    expect(Math.abs(Number(rowA.span_ms) - 1251)).toBeLessThanOrEqual(1);
    const [rowB] = await rows(b.id);
    expect([rowB.expires_at.getTime(), rowB.replay_count]).toEqual([b.expiresAt.getTime(), 1]);
    const [record] = await db.records('id = $1', [a.id]);
    expect(record.replay_count).toBe(3);
  });

  it('refuses an id that is not a uuid or a count that is not a number, and writes nothing', async () => {
    const a = await completed();
    const event = { ...a, recordId: a.id, count: 1, firstReplayedMsAgo: 1, replayedMsAgo: 1 };
    await expect(
      store().recordReplays([event, { ...event, recordId: `${a.id},${a.id}` }]),
    ).rejects.toThrow(/is not a uuid or a finite number/);
    await expect(store().recordReplays([{ ...event, count: NaN }])).rejects.toThrow(TypeError);
    expect(await rows(a.id)).toEqual([]);
  });
});
