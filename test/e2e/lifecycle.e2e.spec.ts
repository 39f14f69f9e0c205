import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { startFixtureApp, type FixtureApp, type Platform } from '../fixtures/payments.fixture.js';
import { send } from '../fixtures/http-client.js';

const PROBLEM = 'application/problem+json';

describe.each<Platform>(['express', 'fastify'])('lifecycle on %s', (platform) => {
  let db: MigratedDatabase;
  let f: FixtureApp;

  beforeAll(async () => {
    db = await createMigratedDatabase(`life_${platform}`);
    // These tests move records through time with SQL, which a process's replay cache cannot see.
    f = await startFixtureApp({
      platform,
      dataSource: db.dataSource,
      serializer: true,
      options: { replayCache: false },
    });
  });
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  });

  const key = () => randomUUID();

  it('runs once and replays the byte-identical response, even where jsonb would reorder keys', async () => {
    const k = key();
    const first = await send(f.url, '/charges', { key: k, body: { amount: 500, key: k } });
    expect(first.status).toBe(201);
    expect(first.text.startsWith('{"zeta":')).toBe(true);
    expect(first.headers['idempotent-replayed']).toBeUndefined();

    const again = await send(f.url, '/charges', { key: k, body: { amount: 500, key: k } });
    expect(again.status).toBe(201);
    expect(again.body.equals(first.body)).toBe(true);
    expect(again.headers['content-type']).toBe(first.headers['content-type']);
    expect(again.headers['content-length']).toBe(String(first.body.length));
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(f.exec.count('charge', k)).toBe(1);

    const [row] = await db.records('idempotency_key = $1', [k]);
    expect(row).toMatchObject({
      status: 'completed',
      status_code: 201,
      endpoint: 'POST /charges',
      user_id: '',
    });
    expect(row.request_hash).toMatch(/^[0-9a-f]{64}$/);
    // jsonb keeps a queryable copy (reordered); the replayed bytes come from response_raw.
    expect(Object.keys(row.response_body)).not.toEqual(Object.keys(first.json()));
    expect(row.response_raw.equals(first.body)).toBe(true);
    expect(row.transaction_id).toBe(first.json().id);
    expect(new Date(row.expires_at).getTime() - new Date(row.completed_at).getTime()).toBeCloseTo(
      86_400_000,
      -3,
    );
  });

  it('treats the same key in the quoted structured-field form as the same key', async () => {
    const k = key();
    const first = await send(f.url, '/charges', { key: k, body: { amount: 1 } });
    const quoted = await send(f.url, '/charges', { key: `"${k}"`, body: { amount: 1 } });
    expect(quoted.headers['idempotent-replayed']).toBe('true');
    expect(quoted.body.equals(first.body)).toBe(true);
  });

  it('gives the same fingerprint to the same body in another key order', async () => {
    const k = key();
    const first = await send(f.url, '/charges', { key: k, body: '{"amount":7,"currency":"eur"}' });
    const reordered = await send(f.url, '/charges', {
      key: k,
      body: '{ "currency": "eur", "amount": 7 }',
    });
    expect(reordered.headers['idempotent-replayed']).toBe('true');
    expect(reordered.body.equals(first.body)).toBe(true);
  });

  it('refuses a key reused with a different request: 409, handler not run', async () => {
    const k = key();
    await send(f.url, '/charges', { key: k, body: { amount: 100, key: k } });
    const other = await send(f.url, '/charges', { key: k, body: { amount: 999, key: k } });
    expect(other.status).toBe(409);
    expect(other.headers['content-type']).toContain(PROBLEM);
    expect(other.json()).toMatchObject({
      status: 409,
      code: 'idempotency_key_reused_with_different_params',
    });
    expect(f.exec.count('charge', k)).toBe(1);
  });

  it('scopes keys per endpoint and per path: a key on /refunds/a is not the key on /refunds/b', async () => {
    const k = key();
    const charge = await send(f.url, '/charges', { key: k, body: {} });
    const order = await send(f.url, '/orders', { key: k, body: {} });
    expect(charge.status).toBe(201);
    expect(order.status).toBe(201);
    expect(order.headers['idempotent-replayed']).toBeUndefined();
    const a = await send(f.url, '/refunds/a', { key: k });
    const b = await send(f.url, '/refunds/b', { key: k });
    expect(a.status).toBe(201);
    // Same scope (POST /refunds/:id), different path: a different request.
    expect(b.status).toBe(409);
    const [row] = await db.records('idempotency_key = $1 AND endpoint = $2', [
      k,
      'POST /refunds/:id',
    ]);
    expect(row.status).toBe('completed');
  });

  it("never replays one user's response to another user with the same key", async () => {
    const k = key();
    const alice = await send(f.url, '/charges', { key: k, user: 'alice', body: { amount: 5 } });
    const bob = await send(f.url, '/charges', { key: k, user: 'bob', body: { amount: 5 } });
    expect(bob.status).toBe(201);
    expect(bob.headers['idempotent-replayed']).toBeUndefined();
    expect(bob.json().id).not.toBe(alice.json().id);
    const aliceAgain = await send(f.url, '/charges', {
      key: k,
      user: 'alice',
      body: { amount: 5 },
    });
    expect(aliceAgain.body.equals(alice.body)).toBe(true);
    expect((await db.records('idempotency_key = $1', [k])).map((r) => r.user_id).sort()).toEqual([
      'alice',
      'bob',
    ]);
  });

  it('stores a business failure (402) and replays the body the client first saw', async () => {
    const k = key();
    const first = await send(f.url, '/declined', { key: k, body: { key: k } });
    expect(first.status).toBe(402);
    expect(first.json()).toEqual({ error: 'card_declined', attempt: expect.any(Number) });
    const again = await send(f.url, '/declined', { key: k, body: { key: k } });
    expect(again.status).toBe(402);
    expect(again.body.equals(first.body)).toBe(true);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(f.exec.count('declined', k)).toBe(1);
  });

  it('releases the claim on an unknown error (500), so a retry runs again', async () => {
    const k = key();
    expect((await send(f.url, '/boom', { key: k, body: { key: k } })).status).toBe(500);
    expect(await db.records('idempotency_key = $1', [k])).toHaveLength(0);
    expect((await send(f.url, '/boom', { key: k, body: { key: k } })).status).toBe(500);
    expect(f.exec.count('boom', k)).toBe(2);
  });

  it('releases the claim on a validation error (400) by default, so a corrected body may reuse the key', async () => {
    const k = key();
    expect((await send(f.url, '/invalid', { key: k, body: { key: k } })).status).toBe(400);
    expect(await db.records('idempotency_key = $1', [k])).toHaveLength(0);
  });

  it.each([
    ['/empty', 201],
    ['/no-content', 204],
  ])('replays an empty body on %s (%i)', async (path, status) => {
    const k = key();
    const first = await send(f.url, path, { key: k });
    const again = await send(f.url, path, { key: k });
    expect(first.status).toBe(status);
    expect(again.status).toBe(status);
    expect(again.body.length).toBe(0);
    expect(again.body.equals(first.body)).toBe(true);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(f.exec.count(path.slice(1))).toBe(1);
  });

  it('replays a string body with its content type', async () => {
    const k = key();
    const first = await send(f.url, '/text', { key: k });
    const again = await send(f.url, '/text', { key: k });
    expect(first.text).toMatch(/^plain text #\d+$/);
    expect(again.text).toBe(first.text);
    expect(again.headers['content-type']).toBe(first.headers['content-type']);
  });

  it('replays Location but never Set-Cookie or headers outside the allow-list', async () => {
    const k = key();
    const first = await send(f.url, '/created', { key: k });
    expect(first.headers['set-cookie']).toBeDefined();
    const again = await send(f.url, '/created', { key: k });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.headers.location).toBe('/charges/ch_loc');
    expect(again.headers['set-cookie']).toBeUndefined();
    const [row] = await db.records('idempotency_key = $1', [k]);
    expect(row.response_headers).toMatchObject({
      location: '/charges/ch_loc',
      'content-type': expect.stringContaining('application/json'),
    });
    expect(row.response_headers['set-cookie']).toBeUndefined();
    expect(row.response_headers['x-custom']).toBeUndefined();
  });

  it('stores what the client saw after a global ClassSerializerInterceptor: no @Exclude() field leaks', async () => {
    const k = key();
    const first = await send(f.url, '/users/me', { key: k });
    expect(first.json().passwordHash).toBeUndefined();
    const again = await send(f.url, '/users/me', { key: k });
    expect(again.body.equals(first.body)).toBe(true);
    const [row] = await db.records('idempotency_key = $1', [k]);
    expect(row.response_raw.toString()).not.toContain('hunter2');
  });

  it('links the record to a transaction id set by the handler', async () => {
    const k = key();
    const res = await send(f.url, '/tx', { key: k });
    const [row] = await db.records('idempotency_key = $1', [k]);
    expect(row.transaction_id).toBe(`txn_${res.json().n}`);
  });

  it('leaves routes without @Idempotent() untouched, key or not', async () => {
    const k = key();
    await send(f.url, '/plain', { key: k });
    const second = await send(f.url, '/plain', { key: k });
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(await db.records('idempotency_key = $1', [k])).toHaveLength(0);
  });

  it('runs unprotected without a key unless the route requires one', async () => {
    const before = f.exec.count('charge');
    await send(f.url, '/charges', { body: {} });
    await send(f.url, '/charges', { body: {} });
    expect(f.exec.count('charge')).toBe(before + 2);
    const required = await send(f.url, '/required', {});
    expect(required.status).toBe(400);
    expect(required.headers['content-type']).toContain(PROBLEM);
    expect(required.json()).toMatchObject({ code: 'idempotency_key_missing', status: 400 });
    expect(f.exec.count('required')).toBe(0);
  });

  it.each([
    ['empty', [['Idempotency-Key', '']]],
    ['too long', [['Idempotency-Key', 'k'.repeat(256)]]],
    ['non-printable', [['Idempotency-Key', 'abc\tdef']]],
    ['non-ASCII', [['Idempotency-Key', 'caf\u00e9']]],
    [
      'sent twice',
      [
        ['Idempotency-Key', 'one'],
        ['idempotency-key', 'two'],
      ],
    ],
    ['an unterminated quote', [['Idempotency-Key', '"abc']]],
  ] as [string, [string, string][]][])(
    'refuses a key that is %s with a 400 problem, storing nothing',
    async (_name, headers) => {
      const before = f.exec.count('charge');
      const res = await send(f.url, '/charges', { headers, body: { amount: 1 } });
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toContain(PROBLEM);
      expect(res.json()).toMatchObject({
        status: 400,
        code: 'idempotency_key_invalid',
        type: expect.any(String),
        title: expect.any(String),
        detail: expect.any(String),
      });
      expect(f.exec.count('charge')).toBe(before);
    },
  );

  it('never lets two different unparsed bodies share a key', async () => {
    const k = key();
    const before = f.exec.count('charge');
    const res = await send(f.url, '/charges', {
      key: k,
      body: 'amount=5 as text',
      contentType: 'text/plain',
    });
    if (platform === 'fastify') {
      // Fastify parses text/plain into a string, which is fingerprinted by its bytes.
      expect(res.status).toBe(201);
      const other = await send(f.url, '/charges', {
        key: k,
        body: 'amount=6 as text',
        contentType: 'text/plain',
      });
      expect(other.status).toBe(409);
      expect(f.exec.count('charge')).toBe(before + 1);
    } else {
      // Nothing parsed it on Express: the library cannot fingerprint it, so it refuses (415).
      expect(res.status).toBe(415);
      expect(res.json()).toMatchObject({ code: 'idempotency_body_unreadable' });
      expect(f.exec.count('charge')).toBe(before);
      expect(await db.records('idempotency_key = $1', [k])).toHaveLength(0);
    }
  });

  it('treats an expired record as a new key, before cleanup has removed it', async () => {
    const k = key();
    const first = await send(f.url, '/charges', { key: k, body: { key: k } });
    await db.dataSource.query(
      `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE idempotency_key = $1`,
      [k],
    );
    const again = await send(f.url, '/charges', { key: k, body: { key: k } });
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.json().id).not.toBe(first.json().id);
    expect(f.exec.count('charge', k)).toBe(2);
    // Even a different request may use an expired key: it is new again.
    await db.dataSource.query(
      `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE idempotency_key = $1`,
      [k],
    );
    expect((await send(f.url, '/charges', { key: k, body: { key: k, amount: 3 } })).status).toBe(
      201,
    );
    const rows = await db.records('idempotency_key = $1', [k]);
    expect(rows).toHaveLength(1);
    expect(rows[0].status).toBe('completed');
  });

  it('answers 409 + Retry-After while a claim holds its lease, and takes over once the lease ran out', async () => {
    const k = key();
    const hash =
      (await send(f.url, '/slow', { key: k, body: { ms: 1 } })) &&
      (await db.records('idempotency_key = $1', [k]))[0].request_hash;
    await db.dataSource.query(
      `UPDATE idempotency_keys SET status = 'in_progress', owner_token = gen_random_uuid(), locked_until = now() + interval '1 hour', response_raw = NULL WHERE idempotency_key = $1`,
      [k],
    );
    const busy = await send(f.url, '/slow', { key: k, body: { ms: 1 } });
    expect(busy.status).toBe(409);
    expect(busy.headers['retry-after']).toBe('2');
    expect(busy.json()).toMatchObject({ code: 'request_in_progress' });
    await db.dataSource.query(
      `UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE idempotency_key = $1`,
      [k],
    );
    const retry = await send(f.url, '/slow', { key: k, body: { ms: 1 } });
    expect(retry.status).toBe(201);
    expect(f.exec.count('slow')).toBe(2);
    const [row] = await db.records('idempotency_key = $1', [k]);
    expect(row).toMatchObject({ status: 'completed', request_hash: hash });
  });

  it('runs the handler once for 50 simultaneous requests with one key', async () => {
    const k = key();
    const results = await Promise.all(
      Array.from({ length: 50 }, () => send(f.url, '/slow', { key: k, body: { ms: 300, key: k } })),
    );
    expect(f.exec.count('slow', k)).toBe(1);
    const winners = results.filter((r) => r.status === 201);
    const conflicts = results.filter((r) => r.status === 409);
    expect(winners.length + conflicts.length).toBe(50);
    expect(winners.length).toBeGreaterThanOrEqual(1);
    for (const r of conflicts) expect(r.json().code).toBe('request_in_progress');
    for (const r of winners) expect(r.body.equals(winners[0].body)).toBe(true);
    const replay = await send(f.url, '/slow', { key: k, body: { ms: 300, key: k } });
    expect(replay.body.equals(winners[0].body)).toBe(true);
  });

  it('does not store a response larger than maxResponseBytes; the retry learns it cannot be replayed', async () => {
    const k = key();
    const first = await send(f.url, '/big', { key: k });
    expect(first.status).toBe(201);
    expect(first.json().pad).toHaveLength(10_000);
    const again = await send(f.url, '/big', { key: k });
    expect(again.status).toBe(409);
    expect(again.json()).toMatchObject({
      code: 'idempotency_response_not_replayable',
      original_status: 201,
    });
    expect(f.exec.count('big')).toBe(1);
    const [row] = await db.records('idempotency_key = $1', [k]);
    expect(row).toMatchObject({ status: 'completed', status_code: 201, response_raw: null });
  });

  it('completes a streamed response without a body: a retry gets 409 not replayable, never a second run', async () => {
    const k = key();
    const ran = f.exec.count('stream');
    const first = await send(f.url, '/stream', { key: k });
    expect(first.text).toBe('chunk-1chunk-2');
    const again = await send(f.url, '/stream', { key: k });
    expect(again.status).toBe(409);
    expect(again.json()).toMatchObject({
      code: 'idempotency_response_not_replayable',
      original_status: 201,
    });
    expect(f.exec.count('stream')).toBe(ran + 1);
    const [row] = await db.records('idempotency_key = $1', [k]);
    expect(row).toMatchObject({ status: 'completed', status_code: 201, response_raw: null });
  });

  it('completes a server-sent events stream without a body, never a second run', async () => {
    const k = key();
    const ran = f.exec.count('events');
    const first = await send(f.url, '/events', { key: k, method: 'GET' });
    expect(first.headers['content-type']).toContain('text/event-stream');
    expect(first.text).toContain('"tick":1');
    const [row] = await db.records('idempotency_key = $1', [k]);
    expect(row).toMatchObject({ status: 'completed', status_code: 200, response_raw: null });
    // Nest answers the problem as a 409, or as an `error` event once the stream's headers went out
    // (which comes first depends on timing); never the ticks of a second run.
    const again = await send(f.url, '/events', { key: k, method: 'GET' });
    if (again.status === 409) {
      expect(again.json()).toMatchObject({ code: 'idempotency_response_not_replayable' });
    } else {
      expect(again.text).toContain('event: error');
    }
    expect(again.text).not.toContain('tick');
    expect(f.exec.count('events')).toBe(ran + 1);
  });

  it('stores and replays a handler that writes the response itself (@Res())', async () => {
    const k = key();
    const first = await send(f.url, '/own', { key: k });
    const again = await send(f.url, '/own', { key: k });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body.equals(first.body)).toBe(true);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(f.exec.count('own')).toBe(1);
  });

  it('applies a controller-level @Idempotent() with its own ttl', async () => {
    const k = key();
    const before = f.exec.count('order');
    await send(f.url, '/orders', { key: k });
    await send(f.url, '/orders', { key: k });
    expect(f.exec.count('order')).toBe(before + 1);
    const [row] = await db.records('idempotency_key = $1 AND endpoint = $2', [k, 'POST /orders']);
    expect(new Date(row.expires_at).getTime() - new Date(row.completed_at).getTime()).toBeCloseTo(
      120_000,
      -3,
    );
  });
});
