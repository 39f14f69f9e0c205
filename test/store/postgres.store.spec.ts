import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { PostgresIdempotencyStore, type Completion } from '../../lib/index.js';
import { tableNames } from '../../lib/store/postgres/table-names.js';
import { idempotencyStoreContract } from '../../lib/testing/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

const t = tableNames('idempotency_keys');
const TIMESTAMPTZ = 1184;
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

describe('PostgresIdempotencyStore audit rows and the timestamps it reads', () => {
  const store = () => new PostgresIdempotencyStore(db.dataSource, 'idempotency_keys');
  const request = (key: string) => ({
    key,
    endpoint: 'POST /audit',
    userId: '',
    requestHash: 'b'.repeat(64),
    ttlSeconds: 60,
    leaseSeconds: 60,
  });
  const claim = (key: string) => store().claim(request(key));
  const completed = async () => {
    const key = randomUUID();
    const outcome = await claim(key);
    if (outcome.type !== 'claimed') throw new Error(outcome.type);
    const done = await store().complete(outcome.lease, {
      statusCode: 201,
      headers: {},
      body: Buffer.from('{}'),
      transactionId: null,
      ttlSeconds: 60,
    });
    return { key, id: outcome.lease.id, expiresAt: done!.expiresAt };
  };
  const rows = (id: string) =>
    db.dataSource.query(
      `SELECT r.replay_count, r.expires_at = date_trunc('milliseconds', k.expires_at) AS same_expiry,
              extract(epoch FROM r.replayed_at - r.first_replayed_at) * 1000 AS span_ms
         FROM ${t.replays} r JOIN ${t.records} k ON k.id = r.record_id WHERE r.record_id = $1`,
      [id],
    ) as Promise<{ replay_count: number; same_expiry: boolean; span_ms: string }[]>;

  it("writes each record's expiry to the ms (far future too), its count, and its first and last replay", async () => {
    const [a, b] = [await completed(), await completed()];
    // An expiry a float8 of seconds cannot hold to the ms (to_timestamp(ms / 1000) gives .584999).
    const far = new Date('2242-03-18T05:09:16.585Z');
    await db.dataSource.query(`UPDATE ${t.records} SET expires_at = $2 WHERE id = $1`, [b.id, far]);
    await store().recordReplays([
      { ...a, recordId: a.id, count: 3, firstReplayedMsAgo: 1500.5, replayedMsAgo: 250.5 },
      { recordId: b.id, expiresAt: far, count: 1, firstReplayedMsAgo: 10.4, replayedMsAgo: 10.4 },
    ]);
    const [rowA] = await rows(a.id);
    expect(rowA).toEqual({ replay_count: 3, same_expiry: true, span_ms: expect.anything() });
    expect(Number(rowA.span_ms)).toBe(1250);
    const [rowB] = await rows(b.id);
    expect([rowB.replay_count, rowB.same_expiry, Number(rowB.span_ms)]).toEqual([1, true, 0]);
    const [record] = await db.records('id = $1', [a.id]);
    expect(record.replay_count).toBe(3);
  });

  it('refuses an id that is not a uuid or a count that is not a number, and writes nothing', async () => {
    const a = await completed();
    const event = { ...a, recordId: a.id, count: 1, firstReplayedMsAgo: 1, replayedMsAgo: 1 };
    await expect(
      store().recordReplays([event, { ...event, recordId: `${a.id},${a.id}` }]),
    ).rejects.toThrow(/is not a uuid/);
    await expect(store().recordReplays([{ ...event, count: NaN }])).rejects.toThrow(
      /NaN is not a safe integer/,
    );
    await expect(store().recordReplays([{ ...event, count: 1.5 }])).rejects.toThrow(
      /1.5 is not a safe integer/,
    );
    await expect(
      store().recordReplays([{ ...event, firstReplayedMsAgo: Infinity }]),
    ).rejects.toThrow(/Infinity is not a finite number/);
    expect(await rows(a.id)).toEqual([]);
  });

  describe("while the app's own type parsers return tagged strings for every type", () => {
    // What an app may register globally: float8 or jsonb kept as text, booleans as 't'/'f'.
    const OIDS = [16, 17, 20, 21, 23, 25, 114, 701, 1043, 1184, 2950, 3802];
    const withTaggedParsers = async (run: () => Promise<void>) => {
      const originals = OIDS.map((oid) => pg.types.getTypeParser(oid, 'text'));
      for (const oid of OIDS) pg.types.setTypeParser(oid, (text: string) => `app:${text}`);
      try {
        await run();
      } finally {
        OIDS.forEach((oid, i) => pg.types.setTypeParser(oid, originals[i]));
      }
    };

    it("claims, stores, replays and refuses as with pg's own parsers", async () => {
      const key = randomUUID();
      let expiresAt: Date | undefined;
      await withTaggedParsers(async () => {
        const outcome = await claim(key);
        if (outcome.type !== 'claimed') throw new Error(outcome.type);
        const busy = await claim(key);
        expect(busy).toEqual({
          type: 'in_progress',
          recordId: outcome.lease.id,
          expiresAt: expect.any(Date),
        });
        const done = await store().complete(outcome.lease, {
          statusCode: 402,
          headers: { 'content-type': 'application/json', 'x-n': '1' },
          body: Buffer.from('{"declined":true}'),
          transactionId: 'tx-1',
          ttlSeconds: 60,
        });
        expect(done?.expiresAt).toBeInstanceOf(Date);
        expect(Number.isNaN(done!.expiresAt.getTime())).toBe(false);
        expect(typeof done?.secondsLeft).toBe('number');
        expiresAt = done!.expiresAt;
        const replay = await claim(key);
        if (replay.type !== 'completed') throw new Error(replay.type);
        expect(replay.expiresAt).toEqual(expiresAt);
        expect(replay.secondsLeft).toBeGreaterThan(50);
        expect(replay.secondsLeft).toBeLessThanOrEqual(60);
        expect(replay.response).toEqual({
          statusCode: 402,
          headers: { 'content-type': 'application/json', 'x-n': '1' },
          body: Buffer.from('{"declined":true}'),
        });
        const peeked = await store().peek(
          { key, endpoint: 'POST /audit', userId: '' },
          'b'.repeat(64),
        );
        expect(peeked).toMatchObject({
          type: 'completed',
          expiresAt,
          secondsLeft: expect.any(Number),
        });
        const other = await store().claim({ ...request(key), requestHash: 'c'.repeat(64) });
        expect(other).toEqual({ type: 'mismatch', recordId: outcome.lease.id, expiresAt });
      });
      const [row] = await db.records('idempotency_key = $1', [key]);
      expect(row).toMatchObject({ status: 'completed', status_code: 402, transaction_id: 'tx-1' });
      expect(row.expires_at.getTime()).toBe(expiresAt!.getTime());
    });

    it('frees a released claim and reports a cleanup run with Dates and numbers', async () => {
      const key = randomUUID();
      await withTaggedParsers(async () => {
        const outcome = await claim(key);
        if (outcome.type !== 'claimed') throw new Error(outcome.type);
        await store().release(outcome.lease);
        expect((await claim(key)).type).toBe('claimed');
        const result = await store().cleanup({ batchSize: 10, retentionSeconds: 60 });
        expect(result.ran).toBe(true);
        expect(typeof result.deleted).toBe('number');
      });
    });
  });

  describe('while the app parses timestamptz as strings (pg.types.setTypeParser)', () => {
    const withStringTimestamps = async (run: () => Promise<void>) => {
      const original = pg.types.getTypeParser(TIMESTAMPTZ, 'text');
      pg.types.setTypeParser(TIMESTAMPTZ, (text: string) => text);
      try {
        await run();
      } finally {
        pg.types.setTypeParser(TIMESTAMPTZ, original);
      }
    };

    it('audits replays of records read while the app parses timestamptz as strings', async () => {
      const { key, id } = await completed();
      await withStringTimestamps(async () => {
        const outcome = await claim(key);
        if (outcome.type !== 'completed') throw new Error(outcome.type);
        expect(outcome.expiresAt).toBeInstanceOf(Date);
        const peeked = await store().peek(
          { key, endpoint: 'POST /audit', userId: '' },
          'b'.repeat(64),
        );
        expect(peeked).toMatchObject({ type: 'completed', expiresAt: outcome.expiresAt });
        const other = await store().claim({ ...request(key), requestHash: 'c'.repeat(64) });
        expect(other).toMatchObject({ type: 'mismatch', expiresAt: outcome.expiresAt });
        const event = { recordId: id, count: 2, firstReplayedMsAgo: 5, replayedMsAgo: 1 };
        await store().recordReplays([{ ...event, expiresAt: outcome.expiresAt }]);
      });
      expect((await rows(id))[0]).toMatchObject({ replay_count: 2, same_expiry: true });
    });

    it('reports a cleanup run skipped under another holder of its lock with Dates', async () => {
      const other = new pg.Client({ connectionString: db.url });
      await other.connect();
      try {
        await other.query(`SELECT pg_advisory_lock(hashtextextended($1, 0))`, [
          'nestjs-pg-idempotency:cleanup:idempotency_keys',
        ]);
        await withStringTimestamps(async () => {
          const result = await store().cleanup({ batchSize: 10, retentionSeconds: 60 });
          expect(result.ran).toBe(false);
          expect(result.skipped?.at).toBeInstanceOf(Date);
          expect(result.skipped?.at.getTime()).toBeGreaterThan(Date.now() - 60_000);
        });
      } finally {
        await other.end();
      }
    });
  });
});
