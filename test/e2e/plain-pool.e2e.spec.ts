import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { ProblemCode } from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { type PoolApp, startPoolApp } from '../fixtures/pool-app.fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A service on plain pg: `forRoot({ pool })` with the app's own pg.Pool, no TypeORM. */
describe('forRoot({ pool }) on real PostgreSQL', () => {
  let app: PoolApp;
  beforeAll(async () => {
    app = await startPoolApp('plain_pool', 6, { cleanup: { enabled: false } });
  });
  afterAll(async () => app?.stop());

  const ledger = async (ref: string) =>
    (await app.pool.query('SELECT ref FROM ledger WHERE ref = $1', [ref])).rowCount;
  const record = async (key: string) =>
    (await app.pool.query('SELECT * FROM idempotency_keys WHERE idempotency_key = $1', [key]))
      .rows[0];

  it('runs once and replays the stored response', async () => {
    const key = randomUUID();
    const first = await send(app.url, '/charge', { key, body: { ref: 'a' } });
    expect(first.status).toBe(201);
    const again = await send(app.url, '/charge', { key, body: { ref: 'a' } });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.equals(first.body)).toBe(true);
    expect(await record(key)).toMatchObject({ status: 'completed', status_code: 201 });
  });

  it('answers 409 in progress while the first request runs', async () => {
    const key = randomUUID();
    const first = send(app.url, '/charge', { key, body: { ref: 'slow', holdMs: 400 } });
    await sleep(150);
    const second = await send(app.url, '/charge', { key, body: { ref: 'slow', holdMs: 400 } });
    expect(second.status).toBe(409);
    expect(second.json().code).toBe(ProblemCode.InProgress);
    expect((await first).status).toBe(201);
  });

  describe.each(['tx', 'single'])('transactional handler (/%s)', (route) => {
    it("commits the handler's INSERT through idem.manager.query with the record", async () => {
      const key = randomUUID();
      const ref = randomUUID();
      const first = await send(app.url, `/${route}`, { key, body: { ref, holdMs: 100 } });
      expect(first.status).toBe(201);
      expect(await ledger(ref)).toBe(1);
      expect(await record(key)).toMatchObject({ status: 'completed', status_code: 201 });
      const again = await send(app.url, `/${route}`, { key, body: { ref, holdMs: 100 } });
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(await ledger(ref)).toBe(1);
    });

    it('rolls the INSERT back and frees the key when the handler throws', async () => {
      const key = randomUUID();
      const ref = randomUUID();
      const failed = await send(app.url, `/${route}`, { key, body: { ref, then: 'throw' } });
      expect(failed.status).toBe(500);
      expect(await ledger(ref)).toBe(0);
      expect(await record(key)).toBeUndefined();
      const retry = await send(app.url, `/${route}`, { key, body: { ref } });
      expect(retry.status).toBe(201);
      expect(await ledger(ref)).toBe(1);
    });

    it('holds the key while the transaction runs: a duplicate gets 409', async () => {
      const key = randomUUID();
      const ref = randomUUID();
      const first = send(app.url, `/${route}`, { key, body: { ref, holdMs: 400 } });
      await sleep(150);
      const second = await send(app.url, `/${route}`, { key, body: { ref } });
      expect(second.status).toBe(409);
      expect((await first).status).toBe(201);
      expect(await ledger(ref)).toBe(1);
    });
  });
});

describe('forRootAsync({ useFactory: () => ({ pool }) })', () => {
  let app: PoolApp;
  beforeAll(async () => {
    app = await startPoolApp('async_pool', 4, { cleanup: { enabled: false } }, 'forRootAsync');
  });
  afterAll(async () => app?.stop());

  it("replays, and commits a transactional handler's write on the app's pool", async () => {
    const key = randomUUID();
    const ref = randomUUID();
    expect((await send(app.url, '/tx', { key, body: { ref } })).status).toBe(201);
    const again = await send(app.url, '/tx', { key, body: { ref } });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect((await app.pool.query('SELECT 1 FROM ledger WHERE ref = $1', [ref])).rowCount).toBe(1);
  });
});
