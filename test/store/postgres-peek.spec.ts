/**
 * `peek` of the PostgreSQL store reads a sealed response back as a replay does (decrypted, bound
 * to its scope and request), and writes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import { PostgresIdempotencyStore } from '../../lib/index.js';
import { ResponseCipher } from '../../lib/response-cipher.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

let db: MigratedDatabase;
beforeAll(async () => {
  db = await createMigratedDatabase('store_peek');
});
afterAll(async () => db?.drop());

describe('PostgresIdempotencyStore.peek with encryption', () => {
  it('decrypts the stored response like a replay, and leaves the row as it was', async () => {
    const cipher = new ResponseCipher({ keys: { a: randomBytes(32) }, activeKeyId: 'a' });
    const store = new PostgresIdempotencyStore(db.dataSource, 'idempotency_keys', { cipher });
    const scope = { key: randomUUID(), endpoint: 'GET /cards/:id', userId: 'alice' };
    const requestHash = 'c'.repeat(64);
    const claim = await store.claim({ ...scope, requestHash, ttlSeconds: 60, leaseSeconds: 60 });
    if (claim.type !== 'claimed') throw new Error(claim.type);
    const body = Buffer.from('{"card":"4242424242424242"}');
    const headers = { 'content-type': 'application/json' };
    await store.complete(claim.lease, {
      statusCode: 200,
      headers,
      body,
      transactionId: null,
      ttlSeconds: 60,
    });
    const [before] = await db.records('id = $1', [claim.lease.id]);
    expect(before.response_raw.includes(body)).toBe(false);

    const peeked = await store.peek(scope, requestHash);
    expect(peeked).toMatchObject({
      type: 'completed',
      recordId: claim.lease.id,
      response: { statusCode: 200, headers, body },
    });
    expect(await store.peek({ ...scope, userId: 'bob' }, requestHash)).toEqual({ type: 'absent' });
    expect(await db.records('id = $1', [claim.lease.id])).toEqual([before]);
  });
});
