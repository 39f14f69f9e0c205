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
