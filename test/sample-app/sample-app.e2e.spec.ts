/**
 * The sample payments service (sample-app/), in-process on a real port, against a fresh database
 * migrated by the app itself: the library used exactly as a user would. Every assertion runs
 * against both flavours: plain `pg` (the default) and TypeORM (`SAMPLE_ORM=typeorm`).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { AppModule, configureApp } from '../../sample-app/src/app.module.js';
import { send } from '../fixtures/http-client.js';
import { parseNamedQueries } from '../fixtures/named-queries.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';
import { CardProcessor } from '../../sample-app/src/payments/card-processor.service.js';
import { waitFor } from '../reliability/support.js';
import type { SampleOrm } from '../../sample-app/src/sample.options.js';
import { PG_POOL } from '../../sample-app/src/pg/pg-database.module.js';
import type pg from 'pg';
import { DataSource } from 'typeorm';

const SLOW_MS = 300;
const PROBLEM = 'application/problem+json';
const LEDGER_SQL = new URL('../../sample-app/sql/reconciliation/ledger.sql', import.meta.url);

interface Call {
  user?: string;
  key?: string;
  body?: unknown;
}

/** Where each flavour records its migrations: the library's first, then the sample's own. */
const FLAVOURS: {
  orm: SampleOrm;
  migrations: string;
  first: string;
  last: string;
  /** The other flavour's migrations table, which this one never creates. */
  other: string;
  /** The app's one pool: its own `pg.Pool`, or the DataSource's. */
  pool(app: INestApplication): pg.Pool;
}[] = [
  {
    orm: 'pg',
    pool: (app) => app.get(PG_POOL),
    other: 'migrations',
    migrations: 'SELECT name FROM idempotency_keys_migrations ORDER BY name',
    first: '001_idempotency_keys.sql',
    last: '006_recovery_points.sql',
  },
  {
    orm: 'typeorm',
    pool: (app) => (app.get(DataSource).driver as unknown as { master: pg.Pool }).master,
    other: 'idempotency_keys_migrations',
    migrations: 'SELECT name FROM migrations ORDER BY id',
    first: 'CreateIdempotencyKeys1764680000000',
    last: 'CreatePaymentsAndRefunds1764700000000',
  },
];

describe.each(FLAVOURS)('sample-app ($orm): payments service with Idempotency-Key', (flavour) => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;
  let checks: DataSource;

  beforeAll(async () => {
    db = await createTestDatabase('sample_app');
    app = configureApp(
      await NestFactory.create(
        AppModule.forRoot({
          databaseUrl: db.url,
          orm: flavour.orm,
          slowMs: SLOW_MS,
          // Records are moved through time with SQL here, which an in-memory replay cache cannot see.
          idempotency: { replayCache: false },
        }),
        {
          logger: false,
        },
      ),
    );
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
    // For assertions, beside the app's own connections (named apart in pg_stat_activity).
    checks = await db.newDataSource({ applicationName: 'sample-test' }).initialize();
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const post = (path: string, c: Call = {}) =>
    send(url, path, { method: 'POST', key: c.key, body: c.body ?? {}, headers: auth(c.user) });
  const get = (path: string, user?: string) =>
    send(url, path, { method: 'GET', headers: auth(user) });
  const auth = (user?: string): [string, string][] =>
    user ? [['Authorization', `Bearer ${user}`]] : [];
  const sql = <T = Record<string, any>>(text: string, params: unknown[] = []): Promise<T[]> =>
    checks.query(text, params);
  const records = (key: string) =>
    sql('SELECT * FROM idempotency_keys WHERE idempotency_key = $1 ORDER BY user_id', [key]);
  const charge = { amount: 1999, currency: 'eur', source: 'tok_visa' };

  it("creates its schema through the migrations: the library's first, then its own", async () => {
    const names = (await sql<{ name: string }>(flavour.migrations)).map((r) => r.name);
    expect(names[0]).toBe(flavour.first);
    expect(names[names.length - 1]).toBe(flavour.last);
    expect(await sql('SELECT to_regclass($1)::text AS t', [flavour.other])).toEqual([{ t: null }]);
    const tables = await sql<{ t: string | null }>(
      `SELECT to_regclass(t)::text AS t FROM unnest(ARRAY['payments', 'refunds', 'idempotency_keys']) AS t`,
    );
    expect(tables.map((r) => r.t)).toEqual(['payments', 'refunds', 'idempotency_keys']);
  });

  it('answers 401 without a bearer token and 400 without a key, claiming nothing', async () => {
    const key = randomUUID();
    const anonymous = await post('/payments', { key, body: charge });
    expect(anonymous.status).toBe(401);
    expect(anonymous.json()).toMatchObject({
      type: 'authentication_error',
      code: 'missing_bearer_token',
    });

    const keyless = await post('/payments', { user: 'alice', body: charge });
    expect(keyless.status).toBe(400);
    expect(keyless.headers['content-type']).toContain(PROBLEM);
    expect(keyless.json()).toMatchObject({ code: 'idempotency_key_missing' });

    expect(await records(key)).toHaveLength(0);
    expect(await sql(`SELECT 1 FROM payments WHERE user_id = 'alice'`)).toHaveLength(0);
  });

  it('charges once and replays the same bytes on retry, with Idempotent-Replayed: true', async () => {
    const key = randomUUID();
    const first = await post('/payments', { user: 'alice', key, body: charge });
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const payment = first.json();
    expect(payment).toMatchObject({
      id: expect.stringMatching(/^pay_[0-9a-f]{24}$/),
      object: 'payment',
      amount: 1999,
      currency: 'eur',
      status: 'succeeded',
    });

    const retry = await post('/payments', { user: 'alice', key, body: charge });
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body.equals(first.body)).toBe(true);

    expect(
      await sql('SELECT id, user_id, amount, status FROM payments WHERE user_id = $1', ['alice']),
    ).toEqual([{ id: payment.id, user_id: 'alice', amount: 1999, status: 'succeeded' }]);
    expect(await records(key)).toEqual([
      expect.objectContaining({
        endpoint: 'POST /payments',
        user_id: 'alice',
        status: 'completed',
        status_code: 201,
        transaction_id: payment.id,
      }),
    ]);
    const fetched = await get(`/payments/${payment.id}`, 'alice');
    expect(fetched.json()).toEqual({ ...payment, refunds: [] });
  });

  it('rejects an invalid body with 400 and releases the key, so the corrected request can use it', async () => {
    const key = randomUUID();
    const invalid = await post('/payments', {
      user: 'vic',
      key,
      body: { amount: -5, currency: 'euro', source: 'tok_visa', extra: 1 },
    });
    expect(invalid.status).toBe(400);
    expect(invalid.json().message).toEqual(
      expect.arrayContaining([
        'property extra should not exist',
        'amount must be a positive number',
        'currency must be a three-letter ISO 4217 code',
      ]),
    );
    expect(await records(key)).toHaveLength(0);

    const corrected = await post('/payments', { user: 'vic', key, body: charge });
    expect(corrected.status).toBe(201);
    expect(corrected.headers['idempotent-replayed']).toBeUndefined();
    expect(await sql(`SELECT id FROM payments WHERE user_id = 'vic'`)).toEqual([
      { id: corrected.json().id },
    ]);
  });

  it('records a declined card once and replays the same 402 body', async () => {
    const key = randomUUID();
    const body = { amount: 500, currency: 'usd', source: 'tok_chargeDeclined' };
    const first = await post('/payments', { user: 'dan', key, body });
    expect(first.status).toBe(402);
    const decline = first.json();
    expect(decline).toEqual({
      type: 'card_error',
      code: 'card_declined',
      decline_code: 'generic_decline',
      message: 'Your card was declined.',
      payment: expect.stringMatching(/^pay_/),
    });

    const retry = await post('/payments', { user: 'dan', key, body });
    expect(retry.status).toBe(402);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body.equals(first.body)).toBe(true);

    expect(
      await sql(`SELECT id, status, failure_code FROM payments WHERE user_id = 'dan'`),
    ).toEqual([{ id: decline.payment, status: 'declined', failure_code: 'card_declined' }]);
    expect(await records(key)).toEqual([
      expect.objectContaining({
        status: 'completed',
        status_code: 402,
        transaction_id: decline.payment,
      }),
    ]);
  });

  it('answers 500 on a processor failure, writes nothing, and lets the retry run again', async () => {
    const key = randomUUID();
    const body = { amount: 700, currency: 'usd', source: 'tok_fail' };
    for (let attempt = 1; attempt <= 2; attempt++) {
      const res = await post('/payments', { user: 'erin', key, body });
      expect(res.status).toBe(500); // not a replay, not 409: the key was released
      expect(res.headers['idempotent-replayed']).toBeUndefined();
      expect(await records(key)).toHaveLength(0);
    }
    expect(await sql(`SELECT 1 FROM payments WHERE user_id = 'erin'`)).toHaveLength(0);
  });

  it('refunds a payment, once per key, and keeps the ledger consistent', async () => {
    const payment = (
      await post('/payments', {
        user: 'frank',
        key: randomUUID(),
        body: { ...charge, amount: 1000 },
      })
    ).json();
    const path = `/payments/${payment.id}/refunds`;

    const key = randomUUID();
    const first = await post(path, { user: 'frank', key, body: { amount: 400 } });
    expect(first.status).toBe(201);
    const refund = first.json();
    expect(refund).toMatchObject({
      id: expect.stringMatching(/^re_/),
      object: 'refund',
      payment: payment.id,
      amount: 400,
    });
    const retry = await post(path, { user: 'frank', key, body: { amount: 400 } });
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body.equals(first.body)).toBe(true);
    expect(await records(key)).toEqual([
      expect.objectContaining({
        endpoint: 'POST /payments/:id/refunds',
        status_code: 201,
        transaction_id: refund.id,
      }),
    ]);

    const tooMuch = await post(path, { user: 'frank', key: randomUUID(), body: { amount: 700 } });
    expect(tooMuch.status).toBe(400);
    expect(tooMuch.json()).toMatchObject({ code: 'amount_too_large' });
    const rest = await post(path, { user: 'frank', key: randomUUID(), body: { amount: 600 } });
    expect(rest.status).toBe(201);

    const after = (await get(`/payments/${payment.id}`, 'frank')).json();
    expect(after).toMatchObject({ status: 'refunded', amount_refunded: 1000 });
    expect(after.refunds.map((r: { amount: number }) => r.amount)).toEqual([400, 600]);
    expect((await get(`/refunds/${refund.id}`, 'frank')).json()).toEqual(refund);
    expect((await get(`/refunds/${refund.id}`, 'mallory')).status).toBe(404);
    expect(
      await sql('SELECT count(*)::int AS n FROM refunds WHERE payment_id = $1', [payment.id]),
    ).toEqual([{ n: 2 }]);

    // A refund of an unknown payment is a final answer too: stored and replayed.
    const missingKey = randomUUID();
    const missing = await post('/payments/pay_doesnotexist/refunds', {
      user: 'frank',
      key: missingKey,
      body: { amount: 1 },
    });
    expect(missing.status).toBe(404);
    const missingAgain = await post('/payments/pay_doesnotexist/refunds', {
      user: 'frank',
      key: missingKey,
      body: { amount: 1 },
    });
    expect(missingAgain.headers['idempotent-replayed']).toBe('true');
    expect(missingAgain.body.equals(missing.body)).toBe(true);
  });

  it('runs a slow charge once under 20 concurrent duplicates: the others get 409 or the replay', async () => {
    const key = randomUUID();
    const body = { amount: 4242, currency: 'usd', source: 'tok_slow' };
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: 20 }, () => post('/payments', { user: 'gus', key, body })),
    );

    const created = results.filter((r) => r.status === 201);
    const inProgress = results.filter((r) => r.status === 409);
    expect(created.length + inProgress.length).toBe(20);
    expect(inProgress.length).toBeGreaterThan(0);
    for (const r of inProgress) {
      expect(r.headers['content-type']).toContain(PROBLEM);
      expect(r.headers['retry-after']).toBe('2');
      expect(r.json()).toMatchObject({ status: 409, code: 'request_in_progress' });
    }
    const original = created.filter((r) => r.headers['idempotent-replayed'] === undefined);
    expect(original).toHaveLength(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(SLOW_MS);
    for (const r of created) expect(r.body.equals(original[0].body)).toBe(true);

    const payments = await sql(`SELECT id FROM payments WHERE user_id = 'gus'`);
    expect(payments).toEqual([{ id: original[0].json().id }]);
    const late = await post('/payments', { user: 'gus', key, body });
    expect(late.headers['idempotent-replayed']).toBe('true');
    expect(late.body.equals(original[0].body)).toBe(true);
  });

  it('sends the processor a derived key: a re-run after a lost lease is not charged twice', async () => {
    const processor = app.get(CardProcessor);
    const seen = new Set(processor.requests.keys());
    const key = randomUUID();
    const body = { amount: 5151, currency: 'usd', source: 'tok_slow' };
    const abandoned = post('/payments', { user: 'hal', key, body });
    await waitFor('the claim', async () => (await records(key)).length === 1, 10_000, 10);
    // As if the instance running it died: its lease ends, and the retry takes the record over.
    await sql(
      `UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE idempotency_key = $1`,
      [key],
    );
    const retry = await post('/payments', { user: 'hal', key, body });
    await abandoned;
    expect(retry.status).toBe(201);
    const derived = [...processor.requests.keys()].filter((k) => !seen.has(k));
    expect(derived).toHaveLength(1);
    expect(derived[0]).not.toContain(key);
    expect(processor.requests.get(derived[0])).toBe(2);
    expect(processor.chargesFor(derived[0])).toBe(1);
    const payments = await sql(`SELECT id FROM payments WHERE user_id = 'hal'`);
    expect(payments).toEqual([{ id: retry.json().id }]);
  });

  it("scopes keys per user: another user's same key is a payment of its own", async () => {
    const key = randomUUID();
    const hana = await post('/payments', { user: 'hana', key, body: charge });
    const ivan = await post('/payments', { user: 'ivan', key, body: charge });
    expect(hana.status).toBe(201);
    expect(ivan.status).toBe(201);
    expect(ivan.headers['idempotent-replayed']).toBeUndefined();
    expect(ivan.json().id).not.toBe(hana.json().id);

    const hanaAgain = await post('/payments', { user: 'hana', key, body: charge });
    expect(hanaAgain.body.equals(hana.body)).toBe(true);
    expect((await records(key)).map((r) => [r.user_id, r.transaction_id])).toEqual([
      ['hana', hana.json().id],
      ['ivan', ivan.json().id],
    ]);
    const ivanList = (await get('/payments', 'ivan')).json();
    expect(ivanList.data.map((p: { id: string }) => p.id)).toEqual([ivan.json().id]);
    expect((await get(`/payments/${hana.json().id}`, 'ivan')).status).toBe(404);
  });

  it('charges again once a key expired; the old record moves to the archive', async () => {
    const key = randomUUID();
    const first = (await post('/payments', { user: 'jo', key, body: charge })).json();
    await sql(
      `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE idempotency_key = $1`,
      [key],
    );
    const second = await post('/payments', { user: 'jo', key, body: charge });
    expect(second.status).toBe(201);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    expect(second.json().id).not.toBe(first.id);
    expect((await records(key)).map((r) => r.transaction_id)).toEqual([second.json().id]);
    expect(
      await sql('SELECT transaction_id FROM idempotency_keys_archive WHERE idempotency_key = $1', [
        key,
      ]),
    ).toEqual([{ transaction_id: first.id }]);
  });

  it('reconciles: the ledger queries list exactly the payments and records that do not match', async () => {
    const queries = parseNamedQueries(await readFile(LEDGER_SQL, 'utf8'));
    expect(Object.keys(queries)).toEqual([
      'payments_without_idempotency_record',
      'idempotency_records_missing_from_ledger',
    ]);

    // Everything the API wrote so far is accounted for, also after the in-flight grace window.
    await sql(`UPDATE payments SET created_at = created_at - interval '1 hour'`);
    expect(await sql(queries.payments_without_idempotency_record)).toEqual([]);
    expect(await sql(queries.idempotency_records_missing_from_ledger)).toEqual([]);

    // Drift, seeded by hand: a payment no record vouches for (plus two the window must ignore)...
    await sql(`INSERT INTO payments (id, user_id, amount, currency, source, status, created_at) VALUES
      ('pay_orphan', 'mallory', 777, 'eur', 'tok_visa', 'succeeded', now() - interval '1 hour'),
      ('pay_orphan_in_flight', 'mallory', 778, 'eur', 'tok_visa', 'succeeded', now()),
      ('pay_orphan_too_old', 'mallory', 779, 'eur', 'tok_visa', 'succeeded', now() - interval '8 days')`);
    // ...a completed record whose payment is not in the ledger, and a success naming no transaction.
    await sql(`INSERT INTO idempotency_keys
      (idempotency_key, endpoint, user_id, request_hash, status, status_code, transaction_id, completed_at, expires_at) VALUES
      ('ghost-charge', 'POST /payments', 'mallory', repeat('0', 64), 'completed', 201, 'pay_ghost', now() - interval '2 minutes', now() + interval '1 day'),
      ('untracked-refund', 'POST /payments/:id/refunds', 'mallory', repeat('0', 64), 'completed', 201, NULL, now() - interval '1 minute', now() + interval '1 day')`);

    const payments = await sql(queries.payments_without_idempotency_record);
    expect(payments).toEqual([
      {
        payment_id: 'pay_orphan',
        user_id: 'mallory',
        amount: 777,
        currency: 'eur',
        status: 'succeeded',
        created_at: expect.any(Date),
      },
    ]);
    const unmatched = await sql(queries.idempotency_records_missing_from_ledger);
    expect(
      unmatched.map((r) => [
        r.idempotency_key,
        r.endpoint,
        r.transaction_id,
        r.problem,
        r.archived,
      ]),
    ).toEqual([
      ['ghost-charge', 'POST /payments', 'pay_ghost', 'transaction_not_in_ledger', false],
      [
        'untracked-refund',
        'POST /payments/:id/refunds',
        null,
        'success_without_transaction_id',
        false,
      ],
    ]);
    // Not vacuous: the ledger holds many matched rows, incl. a decline (402) and an unknown-payment 404 record.
    const [{ n }] = await sql(`SELECT count(*)::int AS n FROM payments`);
    expect(n).toBe(13);
    expect(
      await sql(`SELECT 1 FROM idempotency_keys WHERE status_code IN (402, 404)`),
    ).toHaveLength(2);
  });

  // Last: the reconciliation above counts the payments made before it.
  it("opens one pool: every connection of the app's is one of that pool's", async () => {
    const key = randomUUID();
    expect((await post('/payments', { user: 'olga', key, body: charge })).status).toBe(201);
    expect((await post('/payments', { user: 'olga', key, body: charge })).status).toBe(201);
    // Other connections than the checks' own, by name, next to the pool's own count of them.
    const pool = flavour.pool(app);
    const observed = async () => ({
      connections: await sql<{ app: string; n: number }>(
        `SELECT application_name AS app, count(*)::int AS n FROM pg_stat_activity
          WHERE datname = $1 AND backend_type = 'client backend' AND application_name <> 'sample-test'
          GROUP BY 1`,
        [db.name],
      ),
      pooled: pool.totalCount,
    });
    const expected = (pooled: number) => ({
      connections: [{ app: 'payments-sample', n: pooled }],
      pooled,
    });
    // A connection the pool just let go of (idle timeout) leaves pg_stat_activity a moment later.
    await waitFor(
      'pg_stat_activity to settle',
      async () => {
        const now = await observed();
        return JSON.stringify(now) === JSON.stringify(expected(now.pooled));
      },
      5_000,
    ).catch(() => undefined);
    const now = await observed();
    expect(now.pooled).toBeGreaterThan(0);
    expect(now).toEqual(expected(now.pooled));
  });
});
