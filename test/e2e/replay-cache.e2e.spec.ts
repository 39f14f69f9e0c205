import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { ReplayCache } from '../../lib/execution/replay-cache.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { LogCapture } from '../fixtures/log-capture.js';
import { startFixtureApp, type FixtureApp, type Platform } from '../fixtures/payments.fixture.js';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import fastify from 'fastify';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const response = (text: string) => ({ statusCode: 201, headers: {}, body: Buffer.from(text) });

describe('replay cache', () => {
  it('evicts the least recently used entries past its entry and byte limits', () => {
    const cache = new ReplayCache({ maxEntries: 2, maxBytes: 1_000_000, ttlSeconds: 60 });
    const put = (k: string) =>
      cache.set(
        k,
        { requestHash: 'h', recordId: k, expiresAt: new Date(), response: response(k) },
        3600,
      );
    put('a');
    put('b');
    expect(cache.get('a', 'h')).toBeDefined(); // a is now the most recent
    put('c');
    expect(cache.get('b', 'h')).toBeUndefined();
    expect(cache.get('a', 'h')?.recordId).toBe('a');
    expect(cache.get('c', 'h')?.recordId).toBe('c');
    expect(cache.get('c', 'other-request')).toBeUndefined();
    const small = new ReplayCache({ maxEntries: 100, maxBytes: 800, ttlSeconds: 60 });
    for (const k of ['x', 'y', 'z']) {
      small.set(
        k,
        { requestHash: 'h', recordId: k, expiresAt: new Date(), response: response(k.repeat(100)) },
        3600,
      );
    }
    expect(['x', 'y', 'z'].filter((k) => small.get(k, 'h'))).toEqual(['y', 'z']);
  });

  it('never keeps an entry for a record about to expire, nor a response without a body', () => {
    const cache = new ReplayCache({ maxEntries: 10, maxBytes: 1_000_000, ttlSeconds: 60 });
    cache.set(
      'soon',
      { requestHash: 'h', recordId: 's', expiresAt: new Date(), response: response('s') },
      0.5,
    );
    cache.set(
      'empty',
      {
        requestHash: 'h',
        recordId: 'e',
        expiresAt: new Date(),
        response: { statusCode: 201, headers: {}, body: null },
      },
      3600,
    );
    expect(cache.get('soon', 'h')).toBeUndefined();
    expect(cache.get('empty', 'h')).toBeUndefined();
  });

  describe('in an app', () => {
    let db: MigratedDatabase;
    let f: FixtureApp;
    beforeAll(async () => {
      db = await createMigratedDatabase('replay_cache');
      f = await startFixtureApp({ platform: 'express', dataSource: db.dataSource });
    });
    afterAll(async () => {
      await f?.close();
      await db?.drop();
    });

    it("serves replays from memory, and never past the record's expiry", async () => {
      const key = randomUUID();
      const first = await send(f.url, '/short', { key });
      // Proof that the next replay comes from memory: the stored bytes no longer match.
      await db.dataSource.query(
        `UPDATE idempotency_keys SET response_raw = 'tampered' WHERE idempotency_key = $1`,
        [key],
      );
      const replay = await send(f.url, '/short', { key });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body.equals(first.body)).toBe(true);
      // /short keeps records 3 s: once that passed, the key is new again, cache or not.
      await sleep(3_200);
      const after = await send(f.url, '/short', { key });
      expect(after.headers['idempotent-replayed']).toBeUndefined();
      expect(after.body.equals(first.body)).toBe(false);
      expect(f.exec.count('short')).toBe(2);
    });

    it('keeps users apart: another user with the same key gets an execution of its own', async () => {
      const key = randomUUID();
      const alice = await send(f.url, '/charges', { key, user: 'alice', body: { amount: 1 } });
      await send(f.url, '/charges', { key, user: 'alice', body: { amount: 1 } });
      const bob = await send(f.url, '/charges', { key, user: 'bob', body: { amount: 1 } });
      expect(bob.headers['idempotent-replayed']).toBeUndefined();
      expect(bob.json().id).not.toBe(alice.json().id);
    });
  });

  describe.each<Platform>(['express', 'fastify'])('a cached replay on %s', (platform) => {
    let db: MigratedDatabase;
    let f: FixtureApp;
    const logs = new LogCapture();
    const finished: number[] = [];
    beforeAll(async () => {
      db = await createMigratedDatabase(`replay_direct_${platform}`);
      f = await startFixtureApp({ platform, dataSource: db.dataSource, logger: logs });
      // What an access log sees: the status of each response once it is sent.
      (f.app.getHttpServer() as Server).prependListener(
        'request',
        (_req: IncomingMessage, res: ServerResponse) =>
          res.on('finish', () => finished.push(res.statusCode)),
      );
    });
    afterAll(async () => {
      await f?.close();
      await db?.drop();
    });

    it('is sent once, whole, with the stored status as finish listeners see it, and nothing logged', async () => {
      const key = randomUUID();
      const first = await send(f.url, '/charges', { key, body: { key } });
      expect(first.status).toBe(201);
      finished.length = 0;
      // A client revalidating with the ETag it got: the replay is still the stored answer (Express
      // would otherwise turn its own empty reply into a 304 after the replay was sent).
      const etag = first.headers.etag;
      const headers: [string, string][] = etag ? [['if-none-match', String(etag)]] : [];
      for (let i = 0; i < 3; i++) {
        const replay = await send(f.url, '/charges', { key, body: { key }, headers });
        expect(replay.status).toBe(201);
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect(replay.body.equals(first.body)).toBe(true);
      }
      expect(f.exec.count('charge', key)).toBe(1);
      expect(finished).toEqual([201, 201, 201]);
      expect(logs.lines.filter((l) => l.level === 'error' || l.level === 'warn')).toEqual([]);
    });

    it('answers a 204 replay once, without an error from the platform replying after it', async () => {
      const key = randomUUID();
      expect((await send(f.url, '/no-content', { key })).status).toBe(204);
      finished.length = 0;
      const replay = await send(f.url, '/no-content', { key });
      expect(replay.status).toBe(204);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      await sleep(50);
      expect(finished).toEqual([204]);
      expect(logs.lines.filter((l) => l.level === 'error' || l.level === 'warn')).toEqual([]);
    });
  });

  describe('a cached replay on fastify, with headers set on the reply by a hook', () => {
    let db: MigratedDatabase;
    let f: FixtureApp;
    beforeAll(async () => {
      db = await createMigratedDatabase('replay_fastify_hook');
      // What @fastify/cors does: headers on the reply, which Fastify writes only when it sends.
      const instance = fastify();
      instance.addHook('onRequest', async (_req, reply) => {
        reply.header('access-control-allow-origin', 'https://shop.example');
      });
      f = await startFixtureApp({
        platform: 'fastify',
        dataSource: db.dataSource,
        fastify: instance as never,
      });
    });
    afterAll(async () => {
      await f?.close();
      await db?.drop();
    });

    it('keeps them on the replay, which is written on the raw response', async () => {
      const key = randomUUID();
      const first = await send(f.url, '/charges', { key, body: { key } });
      expect(first.headers['access-control-allow-origin']).toBe('https://shop.example');
      const replay = await send(f.url, '/charges', { key, body: { key } });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body.equals(first.body)).toBe(true);
      expect(replay.headers['access-control-allow-origin']).toBe('https://shop.example');
    });
  });
});
