import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send, type RawResponse } from '../fixtures/http-client.js';
import {
  SINGLE_EXECUTIONS_TABLE,
  startFixtureApp,
  type FixtureApp,
} from '../fixtures/payments.fixture.js';

const REQUESTS = Number(process.env.LOAD_REQUESTS ?? 5_000);
const KEYS = Number(process.env.LOAD_KEYS ?? 500);
const CONCURRENCY = 64;

describe.each([
  { mode: 'lease', path: '/slow', route: 'slow' },
  { mode: 'single-commit', path: '/single/slow', route: 'single-slow' },
])('load through the real HTTP stack ($mode)', ({ mode, path, route }) => {
  let db: MigratedDatabase;
  let f: FixtureApp;
  beforeAll(async () => {
    db = await createMigratedDatabase('load');
    await db.dataSource.query(SINGLE_EXECUTIONS_TABLE);
    f = await startFixtureApp({
      platform: 'express',
      dataSource: db.dataSource,
      singleCommit: true,
    });
  });
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  });

  it(`${REQUESTS} requests over ${KEYS} keys at concurrency ${CONCURRENCY}: each key ran once, every answer is the same bytes or 409`, async () => {
    const keys = Array.from({ length: KEYS }, () => randomUUID());
    // Random duplicates: each request picks a key at random.
    const plan = Array.from({ length: REQUESTS }, () => keys[Math.floor(Math.random() * KEYS)]);
    const answers = new Map<string, RawResponse[]>();
    let next = 0;
    const started = Date.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < plan.length) {
          const key = plan[next++];
          const res = await send(f.url, path, { key, body: { ms: 5, key } });
          answers.set(key, [...(answers.get(key) ?? []), res]);
        }
      }),
    );
    const seconds = (Date.now() - started) / 1000;

    const statuses: Record<number, number> = {};
    for (const [key, responses] of answers) {
      expect(f.exec.count(route, key)).toBe(1);
      const done = responses.filter((r) => r.status === 201);
      expect(done.length).toBeGreaterThanOrEqual(1);
      for (const r of responses) {
        statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        if (r.status === 201) expect(r.body.equals(done[0].body)).toBe(true);
        else {
          expect(r.status).toBe(409);
          expect(r.json().code).toBe('request_in_progress');
        }
      }
    }
    const used = answers.size;
    expect(f.exec.seq).toBe(used);
    expect(
      (
        await db.dataSource.query(
          `SELECT count(*)::int AS n FROM idempotency_keys WHERE status = 'completed'`,
        )
      )[0].n,
    ).toBe(used);
    if (mode === 'single-commit') {
      // Each committed run is one row: exactly one per key.
      const committed = await db.dataSource.query(
        `SELECT count(*)::int AS n, count(DISTINCT idempotency_key)::int AS keys FROM single_executions`,
      );
      expect(committed).toEqual([{ n: used, keys: used }]);
    }
    console.log(
      `load (${mode}): ${REQUESTS} requests, ${used} keys, ${seconds.toFixed(1)} s (${Math.round(REQUESTS / seconds)} req/s), statuses ${JSON.stringify(statuses)}`,
    );
  }, 120_000);
});
