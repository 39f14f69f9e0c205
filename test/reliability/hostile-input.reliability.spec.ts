import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { parseIdempotencyKey } from '../../lib/request/idempotency-key.parser.js';
import { fingerprintRequest } from '../../lib/execution/request-fingerprint.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { keyedRequestHead, sendRaw } from '../fixtures/raw-socket.js';
import { startFixtureApp, type FixtureApp } from '../fixtures/payments.fixture.js';

const runs = Number(process.env.FC_RUNS ?? 150);

/** Deterministic key order shuffle of every object in a JSON value. */
function reorder(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v) => reorder(v, seed + 1));
  if (value && typeof value === 'object') {
    const keys = Object.keys(value);
    const rotated = keys
      .slice(seed % Math.max(keys.length, 1))
      .concat(keys.slice(0, seed % Math.max(keys.length, 1)))
      .reverse();
    return Object.fromEntries(
      rotated.map((k) => [k, reorder((value as Record<string, unknown>)[k], seed + 1)]),
    );
  }
  return value;
}

describe('hostile input', () => {
  let db: MigratedDatabase;
  let f: FixtureApp;
  let port: number;
  const rows = async () =>
    (await db.dataSource.query('SELECT count(*)::int AS n FROM idempotency_keys'))[0].n;

  beforeAll(async () => {
    db = await createMigratedDatabase('hostile');
    f = await startFixtureApp({
      platform: 'express',
      dataSource: db.dataSource,
      options: { replayAudit: 'off', replayCache: false },
    });
    port = Number(new URL(f.url).port);
  });
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  });

  it('any header bytes: never a 500, and a rejected key stores nothing', async () => {
    // Any byte but CR/LF (those end the header line), lengths 0 to 10 000.
    const headerBytes = fc
      .oneof(
        fc.uint8Array({ minLength: 0, maxLength: 300 }),
        fc.uint8Array({ minLength: 250, maxLength: 10_000 }),
        fc
          .string({ unit: 'grapheme', maxLength: 80 })
          .map((s) => new Uint8Array(Buffer.from(s, 'utf8'))),
        fc
          .constantFrom(
            "'; DROP TABLE idempotency_keys; --",
            '"a"',
            '"a\\"b"',
            'a, b',
            '" spaced "',
            '\u0000',
          )
          .map((s) => new Uint8Array(Buffer.from(s, 'latin1'))),
      )
      .map((bytes) => Buffer.from(bytes.filter((b) => b !== 0x0d && b !== 0x0a)));
    await fc.assert(
      fc.asyncProperty(headerBytes, async (keyBytes) => {
        const body = Buffer.from(JSON.stringify({ amount: 1 }));
        await db.dataSource.query('TRUNCATE idempotency_keys');
        const before = await rows();
        const res = await sendRaw(port, keyedRequestHead('/charges', keyBytes, body.length), body);
        expect(res.status).not.toBe(500);
        expect([201, 400, 431]).toContain(res.status);
        const after = await rows();
        // What Node would hand the app as the header value (it trims surrounding blanks).
        let expected: string | undefined;
        try {
          expected = parseIdempotencyKey(
            ['Idempotency-Key', keyBytes.toString('latin1').replace(/^[ \t]+|[ \t]+$/g, '')],
            'idempotency-key',
          );
        } catch {
          expected = undefined;
        }
        if (res.status === 201) {
          expect(after).toBe(before + 1);
          expect(await db.records('idempotency_key = $1', [expected])).toHaveLength(1);
        } else {
          expect(after).toBe(before);
        }
      }),
      { numRuns: runs },
    );
  }, 60_000);

  it("any user id: user B with user A's key gets its own execution, never A's body", async () => {
    const userId = fc
      .string({ minLength: 1, maxLength: 40 })
      .filter((s) => /^[\x21-\x7e]+$/.test(s));
    await fc.assert(
      fc.asyncProperty(userId, userId, async (a, b) => {
        fc.pre(a !== b);
        const key = randomUUID();
        const ra = await send(f.url, '/charges', { key, user: a, body: { amount: 1 } });
        const rb = await send(f.url, '/charges', { key, user: b, body: { amount: 1 } });
        expect(ra.status).toBe(201);
        expect(rb.status).toBe(201);
        expect(rb.headers['idempotent-replayed']).toBeUndefined();
        expect(rb.json().id).not.toBe(ra.json().id);
        const again = await send(f.url, '/charges', { key, user: a, body: { amount: 1 } });
        expect(again.body.equals(ra.body)).toBe(true);
        const stored = await db.records('idempotency_key = $1', [key]);
        expect(stored.map((r) => r.user_id).sort()).toEqual([a, b].sort());
      }),
      { numRuns: Math.ceil(runs / 3) },
    );
  }, 60_000);

  it('any JSON body: the same logical body in another key order is the same request', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue({ maxDepth: 6 }), fc.nat(), async (value, seed) => {
        fc.pre(value !== null && typeof value === 'object');
        const key = randomUUID();
        const first = await send(f.url, '/charges', { key, body: JSON.stringify(value) });
        expect(first.status).toBe(201);
        const second = await send(f.url, '/charges', {
          key,
          body: JSON.stringify(reorder(value, seed)),
        });
        expect(second.status).toBe(201);
        expect(second.headers['idempotent-replayed']).toBe('true');
        expect(second.body.equals(first.body)).toBe(true);
      }),
      { numRuns: Math.ceil(runs / 3) },
    );
  }, 60_000);

  it('fingerprints agree across key orders and differ across values (pure)', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), fc.nat(), fc.jsonValue(), (value, seed, other) => {
        expect(fingerprintRequest('POST', '/p', reorder(value, seed))).toBe(
          fingerprintRequest('POST', '/p', value),
        );
        if (JSON.stringify(reorder(other, 0)) !== JSON.stringify(reorder(value, 0))) {
          expect(fingerprintRequest('POST', '/p', other)).not.toBe(
            fingerprintRequest('POST', '/p', value),
          );
        }
      }),
      { numRuns: runs * 5 },
    );
  }, 60_000);

  it('deep, huge-number and non-JSON bodies: never a 500, nothing stored when rejected', async () => {
    const cases: { body: string; contentType: string }[] = [
      { body: '['.repeat(50_000) + ']'.repeat(50_000), contentType: 'application/json' },
      {
        body: '{"amount": 123456789012345678901234567890123456789}',
        contentType: 'application/json',
      },
      { body: '{"amount": 1e400}', contentType: 'application/json' },
      { body: '{"amount": ', contentType: 'application/json' },
      { body: 'amount=5&currency=eur', contentType: 'application/x-www-form-urlencoded' },
      { body: '<charge amount="5"/>', contentType: 'application/xml' },
      { body: '\u0000\u0001binary', contentType: 'application/octet-stream' },
    ];
    for (const c of cases) {
      const key = randomUUID();
      const before = await rows();
      const res = await send(f.url, '/charges', { key, body: c.body, contentType: c.contentType });
      expect(res.status).not.toBe(500);
      if (res.status >= 400) expect(await rows()).toBe(before);
      else expect(await db.records('idempotency_key = $1', [key])).toHaveLength(1);
    }
  }, 60_000);
});
