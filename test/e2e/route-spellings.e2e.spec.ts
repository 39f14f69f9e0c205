import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { send } from '../fixtures/http-client.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import {
  startFixtureApp,
  type FixtureApp,
  type FixtureOptions,
  type Platform,
} from '../fixtures/payments.fixture.js';

interface Router {
  name: string;
  platform: Platform;
  fastify?: FixtureOptions['fastify'];
  /** Whether this router maps `/charges/` and `/CHARGES` to the `/charges` route. */
  lenient: boolean;
}

const routers: Router[] = [
  { name: 'express (case-insensitive, non-strict by default)', platform: 'express', lenient: true },
  { name: 'fastify (default: case-sensitive, strict slash)', platform: 'fastify', lenient: false },
  {
    name: 'fastify with ignoreTrailingSlash and caseSensitive: false',
    platform: 'fastify',
    fastify: { routerOptions: { ignoreTrailingSlash: true, caseSensitive: false } },
    lenient: true,
  },
];

describe.each(routers)('path spellings on $name', ({ platform, fastify, lenient }) => {
  let db: MigratedDatabase;
  let f: FixtureApp;

  beforeAll(async () => {
    db = await createMigratedDatabase(`spell_${platform}`);
    f = await startFixtureApp({ platform, fastify, dataSource: db.dataSource });
  });
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  });

  const charge = (path: string, key: string) =>
    send(f.url, path, { key, body: { amount: 5, key } });

  it.each([
    ['the query in another order', '/charges?b=2&a=1', true],
    ['a trailing slash', '/charges/?a=1&b=2', lenient],
    ['upper case', '/CHARGES?a=1&b=2', lenient],
    ['an encoded query character', '/charges?a=%31&b=2', true],
  ])('%s is the same request when the router routes it there', async (_, path, routed) => {
    const k = randomUUID();
    const first = await charge('/charges?a=1&b=2', k);
    expect(first.status).toBe(201);
    const again = await charge(path, k);
    if (routed) {
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body.equals(first.body)).toBe(true);
    } else {
      expect(again.status).toBe(404);
    }
    expect(f.exec.count('charge', k)).toBe(1);
    expect(await db.records('idempotency_key = $1', [k])).toHaveLength(1);
  });

  it('treats an empty query ("?") as no query', async () => {
    const k = randomUUID();
    await charge('/charges', k);
    // `new URL()` drops a bare "?", so this request is written by hand.
    const again = await new Promise<{ status?: number; replayed: unknown }>((resolve, reject) => {
      const body = JSON.stringify({ amount: 5, key: k });
      const { port } = new URL(f.url);
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/charges?',
          headers: { 'Idempotency-Key': k, 'Content-Type': 'application/json' },
        },
        (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode, replayed: res.headers['idempotent-replayed'] }),
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(again).toEqual({ status: 201, replayed: 'true' });
    expect(f.exec.count('charge', k)).toBe(1);
  });

  it.each([
    ['another query value', '/charges?a=1&b=3'],
    ['another query parameter', '/charges?a=1&b=2&c=3'],
    ['a repeated query parameter', '/charges?a=1&a=1&b=2'],
  ])('still refuses %s with the same key', async (_, path) => {
    const k = randomUUID();
    await charge('/charges?a=1&b=2', k);
    expect((await charge(path, k)).status).toBe(409);
    expect(f.exec.count('charge', k)).toBe(1);
  });

  it('tells route params apart, but not their encodings', async () => {
    const k = randomUUID();
    const a = await send(f.url, '/refunds/a', { key: k });
    expect(a.status).toBe(201);
    const encoded = await send(f.url, '/refunds/%61', { key: k });
    expect(encoded.headers['idempotent-replayed']).toBe('true');
    expect((await send(f.url, '/refunds/b', { key: k })).status).toBe(409);
  });
});
