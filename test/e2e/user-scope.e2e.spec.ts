import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import { startAuthApp, type AuthApp } from '../fixtures/auth.fixture.js';
import { send, type SendOptions } from '../fixtures/http-client.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { startFixtureApp, type FixtureApp, type Platform } from '../fixtures/payments.fixture.js';

const PROBLEM = 'application/problem+json';

// The users of the docs' example (`UsersService`): numeric ids.
const alice = { sub: 1, username: 'john' };
const bob = { sub: 2, username: 'maria' };

describe.each<Platform>(['express', 'fastify'])(
  'user scope of the NestJS docs set-ups on %s',
  (platform) => {
    let db: MigratedDatabase;
    let a: AuthApp;

    beforeAll(async () => {
      db = await createMigratedDatabase(`scope_${platform}`);
      a = await startAuthApp(platform, db.dataSource);
    });
    afterAll(async () => {
      await a?.close();
      await db?.drop();
    });

    const as = async (payload: object, path: string, o: SendOptions = {}) =>
      send(a.url, path, {
        body: { amount: 500 },
        ...o,
        headers: [['Authorization', `Bearer ${await a.jwt.signAsync(payload)}`]],
      });

    it.each([
      ['passport-jwt strategy ({ userId: payload.sub })', 'passport', '/passport/payments'],
      ['hand-written AuthGuard (request.user = payload)', 'guard', '/guard/payments'],
    ])('%s: Alice and Bob with the same key each get their own response', async (_, name, path) => {
      const k = randomUUID();
      const first = await as(alice, path, { key: k });
      const second = await as(bob, path, { key: k });
      const aliceAgain = await as(alice, path, { key: k });
      const bobAgain = await as(bob, path, { key: k });
      expect([first.status, second.status]).toEqual([201, 201]);
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      expect(second.json().user.username).toBe('maria');
      expect(aliceAgain.headers['idempotent-replayed']).toBe('true');
      expect(aliceAgain.body.equals(first.body)).toBe(true);
      expect(bobAgain.headers['idempotent-replayed']).toBe('true');
      expect(bobAgain.body.equals(second.body)).toBe(true);
      const users = (await db.records('idempotency_key = $1', [k])).map((r) => r.user_id).sort();
      expect(users).toEqual(['1', '2']);
      // Once per user: the count is keyed by the user object the handler saw.
      expect(a.exec.count(name, JSON.stringify(first.json().user))).toBe(1);
      expect(a.exec.count(name, JSON.stringify(second.json().user))).toBe(1);
    });

    it('refuses a user with no id it can read (500), stores nothing, runs nothing, logs once per route', async () => {
      const before = a.errors.length;
      const ran = a.exec.seq;
      for (let i = 0; i < 3; i++) {
        const k = randomUUID();
        const res = await send(a.url, '/email/payments', { key: k, body: { amount: 1 } });
        expect(res.status).toBe(500);
        expect(res.headers['content-type']).toContain(PROBLEM);
        expect(res.json()).toMatchObject({ status: 500, code: 'idempotency_misconfigured' });
        expect(res.json().detail).toContain('req.user is set but getUserId found no user id');
        expect(await db.records('idempotency_key = $1', [k])).toHaveLength(0);
      }
      expect(a.exec.seq).toBe(ran);
      const logged = a.errors.slice(before).filter((e) => e.includes('POST /email/payments'));
      expect(logged).toHaveLength(1);
      expect(logged[0]).toContain('req.user is set but getUserId found no user id');
    });

    it.each([
      ['3 000 characters', randomBytes(2250).toString('base64'), 'longer than 255'],
      ['a NUL character', 'alice\u0000admin', 'control characters'],
    ])(
      'answers 400 to a user id of %s: nothing stored, handler not run',
      async (_, sub, detail) => {
        const k = randomUUID();
        const ran = a.exec.seq;
        const user = { sub, username: 'mallory' };
        const res = await as(user, '/guard/payments', { key: k });
        expect(res.status).toBe(400);
        expect(res.headers['content-type']).toContain(PROBLEM);
        expect(res.headers['retry-after']).toBeUndefined();
        expect(res.json()).toMatchObject({ status: 400, code: 'idempotency_user_invalid' });
        expect(res.json().detail).toContain(detail);
        expect(await db.records('idempotency_key = $1', [k])).toHaveLength(0);
        expect(a.exec.seq).toBe(ran);
      },
    );
  },
);

describe('a getUserId that returns the whole user object', () => {
  let db: MigratedDatabase;
  let a: AuthApp;

  beforeAll(async () => {
    db = await createMigratedDatabase('scope_object');
    a = await startAuthApp('express', db.dataSource, { getUserId: (req) => req.user });
  });
  afterAll(async () => {
    await a?.close();
    await db?.drop();
  });

  it('is refused (500) instead of putting every user in the scope "[object Object]"', async () => {
    const k = randomUUID();
    const token = await a.jwt.signAsync(alice);
    const res = await send(a.url, '/guard/payments', {
      key: k,
      body: { amount: 1 },
      headers: [['Authorization', `Bearer ${token}`]],
    });
    expect(res.status).toBe(500);
    expect(res.json()).toMatchObject({ code: 'idempotency_misconfigured' });
    expect(await db.records('idempotency_key = $1', [k])).toHaveLength(0);
    expect(a.exec.seq).toBe(0);
    expect(a.errors.some((e) => e.includes('getUserId returned an object'))).toBe(true);
  });
});

/** What the README quick start used to set: `req.user?.id` on an app whose guard sets `{ sub }`. */
describe('a getUserId that finds no id in a JWT payload', () => {
  let db: MigratedDatabase;
  let a: AuthApp;

  beforeAll(async () => {
    db = await createMigratedDatabase('scope_custom');
    a = await startAuthApp('express', db.dataSource, { getUserId: (req) => req.user?.id });
  });
  afterAll(async () => {
    await a?.close();
    await db?.drop();
  });

  it('is refused (500) with a message about the getUserId that was set, not "set the getUserId option"', async () => {
    const token = await a.jwt.signAsync(alice);
    const res = await send(a.url, '/guard/payments', {
      key: randomUUID(),
      body: { amount: 1 },
      headers: [['Authorization', `Bearer ${token}`]],
    });
    expect(res.status).toBe(500);
    const { detail } = res.json();
    expect(detail).toContain('req.user is set but the getUserId option returned undefined');
    expect(detail).toContain(
      'leave getUserId out: the default reads req.user.id, .sub, then .userId',
    );
    expect(detail).not.toContain('set the getUserId option');
    expect(a.exec.seq).toBe(0);
  });
});

describe.each<Platform>(['express', 'fastify'])('a user id from a header on %s', (platform) => {
  let db: MigratedDatabase;
  let f: FixtureApp;

  beforeAll(async () => {
    db = await createMigratedDatabase(`scope_header_${platform}`);
    f = await startFixtureApp({ platform, dataSource: db.dataSource }); // getUserId: x-user-id
  });
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  });

  it('is a client error when PostgreSQL could not index it (3 000 characters): 400, not 503', async () => {
    const k = randomUUID();
    // Random, so PostgreSQL cannot compress it under the B-tree row limit.
    const user = randomBytes(2250).toString('base64');
    const res = await send(f.url, '/charges', { key: k, user, body: {} });
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ code: 'idempotency_user_invalid' });
    expect(await db.records('idempotency_key = $1', [k])).toHaveLength(0);
    expect(f.exec.seq).toBe(0);
  });

  it('accepts exactly 255 characters', async () => {
    const k = randomUUID();
    const res = await send(f.url, '/charges', { key: k, user: 'é'.repeat(255), body: {} });
    expect(res.status).toBe(201);
    const [row] = await db.records('idempotency_key = $1', [k]);
    expect(row.user_id).toBe('é'.repeat(255));
  });
});
