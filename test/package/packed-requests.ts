/** Requests to a running test/package app, and what they left in its database. */
import { expect } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { TestDatabase } from '../harness/test-database.js';
import type { RunningApp } from './packed-app.js';

/** POSTs `body` to /payments under `key`; the status, headers and the exact bytes answered. */
export async function postPayment(
  app: RunningApp,
  key: string,
  body: object,
  headers: Record<string, string> = {},
) {
  const res = await fetch(new URL('/payments', app.url), {
    method: 'POST',
    headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { res, body: await res.text() };
}

/** The same payment twice under one fresh key: the second is the retry. */
export async function chargeTwice(
  app: RunningApp,
  headers: Record<string, string> = {},
  body: object = { amount: 500, currency: 'eur' },
) {
  const key = randomUUID();
  const first = await postPayment(app, key, body, headers);
  const second = await postPayment(app, key, body, headers);
  return { key, first, second };
}

/** Runs one query on the app's database, on a connection of the test's own. */
export async function queryDb(db: TestDatabase, text: string, values: unknown[] = []) {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** Columns of the key's record in the app's database. */
export const recordOf = (db: TestDatabase, columns: string, key: string) =>
  queryDb(db, `SELECT ${columns} FROM idempotency_keys WHERE idempotency_key = $1`, [key]);

/**
 * An app whose POST /payments is `@Idempotent({ transactional: true })` and writes the payment
 * `{ id, amount }` through its tool (`X-Fail: 1`: throws after the write). The row is there once,
 * written by the very transaction that completed the record (same `xmin`); the retry replays the
 * same bytes; a failed call leaves no row and its key free for a fresh run.
 */
export async function expectPaymentCommittedWithRecord(db: TestDatabase, app: RunningApp) {
  const id = `pay_${randomUUID()}`;
  const { key, first, second } = await chargeTwice(app, {}, { id, amount: 500 });
  expect(first.res.status).toBe(201);
  expect(JSON.parse(first.body)).toMatchObject({ id, amount: 500 });
  expect(second.res.status).toBe(201);
  expect(second.res.headers.get('idempotent-replayed')).toBe('true');
  expect(second.body).toBe(first.body);
  const committed = `SELECT p.id, k.status, p.xmin::text = k.xmin::text AS same_transaction
    FROM payments p JOIN idempotency_keys k ON k.idempotency_key = $2 WHERE p.id = $1`;
  expect(await queryDb(db, committed, [id, key])).toEqual([
    { id, status: 'completed', same_transaction: true },
  ]);

  const failedId = `pay_${randomUUID()}`;
  const failedKey = randomUUID();
  const body = { id: failedId, amount: 700 };
  const failed = await postPayment(app, failedKey, body, { 'X-Fail': '1' });
  expect(failed.res.status).toBe(500);
  const rows = 'SELECT id FROM payments WHERE id = $1';
  expect(await queryDb(db, rows, [failedId])).toEqual([]);
  const retry = await postPayment(app, failedKey, body);
  expect(retry.res.status).toBe(201);
  expect(retry.res.headers.get('idempotent-replayed')).toBeNull();
  expect(await queryDb(db, rows, [failedId])).toEqual([{ id: failedId }]);
}
