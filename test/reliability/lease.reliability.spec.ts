import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { startFixtureApp, type FixtureApp } from '../fixtures/payments.fixture.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('lease heartbeat, fencing and maximum hold', () => {
  let db: MigratedDatabase;
  let f: FixtureApp | undefined;
  beforeAll(async () => {
    db = await createMigratedDatabase('lease');
  });
  afterEach(async () => {
    await f?.close();
    f = undefined;
  });
  afterAll(async () => db?.drop());

  it('renews the lease of a handler slower than the lease, so its key is never taken over', async () => {
    f = await startFixtureApp({
      platform: 'express',
      dataSource: db.dataSource,
      options: { leaseSeconds: 1.5 },
    });
    const key = randomUUID();
    const body = { ms: 4_000, key };
    const first = send(f.url, '/slow', { key, body });
    await sleep(200);
    const during: number[] = [];
    for (let t = 0; t < 10; t++) {
      during.push((await send(f.url, '/slow', { key, body })).status);
      await sleep(300);
    }
    expect(during.every((s) => s === 409)).toBe(true);
    const done = await first;
    expect(done.status).toBe(201);
    expect(f.exec.count('slow', key)).toBe(1);
    const [row] = await db.records('idempotency_key = $1', [key]);
    expect(row.response_raw.equals(done.body)).toBe(true);
  }, 30_000);

  it('stops renewing after maxHoldSeconds: the key can be taken over, and the late completion is fenced out', async () => {
    f = await startFixtureApp({
      platform: 'express',
      dataSource: db.dataSource,
      options: { leaseSeconds: 1, maxHoldSeconds: 1 },
    });
    const key = randomUUID();
    const body = { ms: 4_000, key };
    const hung = send(f.url, '/slow', { key, body });
    await sleep(3_000); // past maxHold (1 s) plus a whole lease (1 s)
    const takeover = send(f.url, '/slow', { key, body });
    const late = await hung; // finishes at ~4 s, while the takeover still runs
    expect(late.status).toBe(201);
    const [during] = await db.records('idempotency_key = $1', [key]);
    expect(during.status).toBe('in_progress'); // the late completion did not overwrite the new owner
    const winner = await takeover;
    expect(winner.status).toBe(201);
    expect(f.exec.count('slow', key)).toBe(2);
    const [row] = await db.records('idempotency_key = $1', [key]);
    expect(row.status).toBe('completed');
    expect(row.response_raw.equals(winner.body)).toBe(true);
    expect(winner.body.equals(late.body)).toBe(false);
  }, 30_000);
});
