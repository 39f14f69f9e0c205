import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { Idempotent, type IdempotencyModuleOptions } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { startFixtureApp, type FixtureApp, type Platform } from '../fixtures/payments.fixture.js';
import { send } from '../fixtures/http-client.js';

const keyA = randomBytes(32);
const keyB = randomBytes(32);
const onlyA = { keys: { A: keyA.toString('base64') }, activeKeyId: 'A' };
const aAndB = { keys: { A: keyA, B: keyB }, activeKeyId: 'B' };
const onlyB = { keys: { B: keyB }, activeKeyId: 'B' };

describe.each<Platform>(['express', 'fastify'])('stored response protection on %s', (platform) => {
  let db: MigratedDatabase;
  beforeAll(async () => {
    db = await createMigratedDatabase(`protect_${platform}`);
  });
  afterAll(async () => db?.drop());

  /** One app life; records changed by SQL in between must not be hidden by a replay cache. */
  async function withApp<T>(
    options: Partial<IdempotencyModuleOptions>,
    run: (f: FixtureApp) => Promise<T>,
  ): Promise<T> {
    const f = await startFixtureApp({
      platform,
      dataSource: db.dataSource,
      options: { replayCache: false, ...options },
    });
    try {
      return await run(f);
    } finally {
      await f.close();
    }
  }
  const row = async (k: string, user = '') =>
    (await db.records('idempotency_key = $1 AND user_id = $2', [k, user]))[0];
  const notReplayable = (status: number) => ({
    code: 'idempotency_response_not_replayable',
    original_status: status,
  });

  it('keeps no plaintext at rest: headers and body sealed in response_raw, replayed byte-identically, archived as ciphertext', async () => {
    const k = randomUUID();
    await withApp({ encryption: onlyA }, async (f) => {
      const first = await send(f.url, '/created', { key: k });
      expect(first.status).toBe(201);
      const stored = await row(k);
      expect(stored).toMatchObject({ response_key_id: 'A', response_body: null });
      expect(stored.response_headers).toBeNull();
      expect(stored.response_raw.includes(first.body)).toBe(false);
      expect(stored.response_raw.includes(Buffer.from('"n":'))).toBe(false);
      expect(stored.response_raw.includes(Buffer.from('/charges/ch_loc'))).toBe(false);

      const again = await send(f.url, '/created', { key: k });
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.status).toBe(201);
      expect(again.body.equals(first.body)).toBe(true);
      expect(again.headers.location).toBe('/charges/ch_loc');
      expect(again.headers['content-type']).toBe(first.headers['content-type']);
      expect(f.exec.count('created')).toBe(1);

      // Expired and taken over: the archive keeps the ciphertext and key id as they were.
      await db.dataSource.query(
        `UPDATE idempotency_keys SET expires_at = now() WHERE idempotency_key = $1`,
        [k],
      );
      expect((await send(f.url, '/created', { key: k })).headers['idempotent-replayed']).toBe(
        undefined,
      );
      const [archived] = await db.dataSource.query(
        `SELECT * FROM idempotency_keys_archive WHERE id = $1`,
        [stored.id],
      );
      expect(archived.response_key_id).toBe('A');
      expect(archived.response_body).toBeNull();
      expect(archived.response_raw.equals(stored.response_raw)).toBe(true);
    });
  });

  it('rotates keys across restarts: old rows replay under any listed key, new rows use the active one, a dropped key answers 409', async () => {
    const k1 = randomUUID();
    const k2 = randomUUID();
    const first = await withApp({ encryption: onlyA }, (f) =>
      send(f.url, '/charges', { key: k1, body: { amount: 1 } }),
    );
    expect((await row(k1)).response_key_id).toBe('A');

    const second = await withApp({ encryption: aAndB }, async (f) => {
      const replay = await send(f.url, '/charges', { key: k1, body: { amount: 1 } });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body.equals(first.body)).toBe(true);
      const created = await send(f.url, '/charges', { key: k2, body: { amount: 2 } });
      expect((await send(f.url, '/charges', { key: k2, body: { amount: 2 } })).body).toEqual(
        created.body,
      );
      return created;
    });
    expect((await row(k2)).response_key_id).toBe('B');

    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      await withApp({ encryption: onlyB }, async (f) => {
        const dropped = await send(f.url, '/charges', { key: k1, body: { amount: 1 } });
        expect(dropped.status).toBe(409);
        expect(dropped.json()).toMatchObject(notReplayable(201));
        expect(dropped.text).not.toContain('ch_');
        expect(f.exec.count('charge')).toBe(0);
        const kept = await send(f.url, '/charges', { key: k2, body: { amount: 2 } });
        expect(kept.body.equals(second.body)).toBe(true);
      });
      expect(errors.mock.calls.map((c) => String(c[0]))).toEqual([
        expect.stringMatching(/Cannot decrypt .* \(key id "A"\): key id "A" is not configured/),
      ]);
      // Encryption switched off again: sealed rows are refused, never sent as garbage.
      await withApp({}, async (f) => {
        const off = await send(f.url, '/charges', { key: k2, body: { amount: 2 } });
        expect(off.json()).toMatchObject(notReplayable(201));
      });
    } finally {
      errors.mockRestore();
    }
  });

  it('still replays plaintext rows written before encryption was turned on', async () => {
    const k = randomUUID();
    const first = await withApp({}, (f) => send(f.url, '/charges', { key: k, body: {} }));
    expect((await row(k)).response_key_id).toBeNull();
    await withApp({ encryption: onlyA }, async (f) => {
      const replay = await send(f.url, '/charges', { key: k, body: {} });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body.equals(first.body)).toBe(true);
    });
  });

  it("refuses a ciphertext copied onto another user's row, or a row whose status was changed", async () => {
    const k = randomUUID();
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      await withApp({ encryption: onlyA }, async (f) => {
        const alice = await send(f.url, '/charges', { key: k, user: 'alice', body: {} });
        const bob = await send(f.url, '/charges', { key: k, user: 'bob', body: {} });
        expect(alice.body.equals(bob.body)).toBe(false);
        await db.dataSource.query(
          `UPDATE idempotency_keys SET response_raw = (SELECT response_raw FROM idempotency_keys
             WHERE idempotency_key = $1 AND user_id = 'alice')
           WHERE idempotency_key = $1 AND user_id = 'bob'`,
          [k],
        );
        const stolen = await send(f.url, '/charges', { key: k, user: 'bob', body: {} });
        expect(stolen.status).toBe(409);
        expect(stolen.json()).toMatchObject(notReplayable(201));
        expect(stolen.body.includes(alice.body)).toBe(false);

        // The same row handed to another user (its id unchanged) does not open either.
        await send(f.url, '/charges', { key: k, user: 'dave', body: {} });
        await db.dataSource.query(
          `UPDATE idempotency_keys SET user_id = 'carol' WHERE idempotency_key = $1 AND user_id = 'dave'`,
          [k],
        );
        const moved = await send(f.url, '/charges', { key: k, user: 'carol', body: {} });
        expect(moved.json()).toMatchObject(notReplayable(201));

        await db.dataSource.query(
          `UPDATE idempotency_keys SET status_code = 200 WHERE idempotency_key = $1 AND user_id = 'alice'`,
          [k],
        );
        const relabelled = await send(f.url, '/charges', { key: k, user: 'alice', body: {} });
        expect(relabelled.json()).toMatchObject(notReplayable(200));
        expect(f.exec.count('charge')).toBe(3);
      });
      expect(errors).toHaveBeenCalledTimes(3);
    } finally {
      errors.mockRestore();
    }
  });

  it('stores nothing of a too-large response when encrypting', async () => {
    const k = randomUUID();
    await withApp({ encryption: onlyA }, async (f) => {
      expect((await send(f.url, '/big', { key: k })).status).toBe(201);
      expect(await row(k)).toMatchObject({
        status_code: 201,
        response_raw: null,
        response_headers: null,
        response_key_id: null,
      });
      expect((await send(f.url, '/big', { key: k })).json()).toMatchObject(notReplayable(201));
    });
  });

  it("'digest' routes keep only the status and the SHA-256 of the body; a retry gets 409, even with the replay cache on", async () => {
    const k = randomUUID();
    const f = await startFixtureApp({ platform, dataSource: db.dataSource });
    try {
      const first = await send(f.url, '/cards', { key: k });
      expect(first.status).toBe(201);
      expect(first.json().number).toBe('4242424242424242');
      const stored = await row(k);
      expect(stored).toMatchObject({
        status: 'completed',
        status_code: 201,
        response_raw: null,
        response_body: null,
        response_headers: null,
        response_key_id: null,
        transaction_id: first.json().id,
        response_digest: createHash('sha256').update(first.body).digest('hex'),
      });
      for (let i = 0; i < 2; i++) {
        const again = await send(f.url, '/cards', { key: k });
        expect(again.status).toBe(409);
        expect(again.headers['content-type']).toContain('application/problem+json');
        expect(again.json()).toMatchObject({
          ...notReplayable(201),
          detail: expect.stringContaining('digest'),
        });
        expect(again.text).not.toContain('4242');
      }
      expect(f.exec.count('card')).toBe(1);
    } finally {
      await f.close();
    }
  });
});

describe('storeResponse option', () => {
  it('refuses an unknown value when the controller is declared', () => {
    expect(() => Idempotent({ storeResponse: 'digets' as never })).toThrow(
      /storeResponse must be 'full' or 'digest', got "digets"/,
    );
  });
});
