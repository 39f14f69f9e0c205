import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { IdempotencyCleanupService } from '../../lib/index.js';
import { withAdminClient } from '../harness/test-database.js';
import { send } from '../fixtures/http-client.js';
import { type PoolApp, startPoolApp } from '../fixtures/pool-app.fixture.js';

const MAX = 5;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let app: PoolApp;
beforeAll(async () => {
  app = await startPoolApp('one_pool', MAX);
});
afterAll(async () => app?.stop());

interface Backend {
  pid: number;
  application_name: string;
  state: string | null;
}

/**
 * A service on plain pg opens exactly one pool: every backend on its database, sampled through
 * claims, replays, both transactional modes and a cleanup run, carries the application_name of
 * the app's own pool, and there are never more than that pool's max.
 */
it('opens no connection outside the app pool, and never more than its max', async () => {
  const seen = new Map<number, string>();
  let most = 0;
  let sampling = true;
  const sampler = withAdminClient(async (admin) => {
    while (sampling) {
      const { rows } = await admin.query<Backend>(
        `SELECT pid, application_name, state FROM pg_stat_activity
          WHERE datname = $1 AND pid <> pg_backend_pid()`,
        [app.db.name],
      );
      // A backend still starting (state NULL) shows no application_name yet: its name is
      // taken once it has started; it still counts towards the pool's max.
      for (const row of rows) if (row.state !== null) seen.set(row.pid, row.application_name);
      most = Math.max(most, rows.length);
      await sleep(5);
    }
  });
  // The transaction-pooler probe at start-up used two clients of its own: let them go first.
  await sleep(200);
  seen.clear();
  most = 0;

  const burst = (path: string, body: (i: number) => object) =>
    Promise.all(
      Array.from({ length: 3 * MAX }, (_, i) =>
        send(app.url, path, { key: randomUUID(), body: body(i) }),
      ),
    );
  const statuses = [
    ...(await burst('/charge', (i) => ({ ref: `c${i}`, holdMs: 30 }))),
    ...(await burst('/tx', (i) => ({ ref: `t${i}`, holdMs: 30 }))),
    ...(await burst('/single', (i) => ({ ref: `s${i}`, holdMs: 30 }))),
  ].map((r) => r.status);
  const key = randomUUID();
  for (let i = 0; i < 3; i++) {
    statuses.push((await send(app.url, '/charge', { key, body: { ref: 'replayed' } })).status);
  }
  const cleanup = await app.app.get(IdempotencyCleanupService).run();
  await sleep(50);
  sampling = false;
  await sampler;

  expect(statuses.filter((s) => s !== 201)).toEqual([]);
  expect(cleanup.ran).toBe(true);
  expect(app.controller.runs).toBe(3 * MAX + 1);
  // Every backend seen belongs to the app's pool, and they were never more than its max.
  expect([...new Set(seen.values())]).toEqual([app.applicationName]);
  expect(seen.size).toBeGreaterThan(1);
  expect(seen.size).toBeLessThanOrEqual(MAX);
  expect(most).toBeLessThanOrEqual(MAX);
  expect(app.pool.totalCount).toBeLessThanOrEqual(MAX);
});
