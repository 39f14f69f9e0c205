/**
 * Wall clock jumps (an NTP step, a VM resumed from a snapshot) in one of two app processes: the
 * child's `Date` is moved at run time (child/clock-shift.ts) while PostgreSQL's clock and the
 * child's timers run on. Durations must come from a monotonic clock and stored moments from
 * the database, so nothing here may change what the library does.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { MigratedDatabase } from '../fixtures/migrated-database.js';
import { send, type RawResponse } from '../fixtures/http-client.js';
import {
  killChildApps,
  prepareChildRun,
  sleep,
  startChildApp,
  waitFor,
  type ChildApp,
} from './support.js';

const HOUR_MS = 3_600_000;
const body = { amount: 500, currency: 'eur' };

interface AuditRow {
  replay_count: number;
  first_replayed_at: Date;
  replayed_at: Date;
  last_replayed_at: Date;
  record_count: number;
}

describe('wall clock jumps in one of two app instances', () => {
  let db: MigratedDatabase;
  let script: string;

  beforeAll(async () => {
    ({ script } = await prepareChildRun('clock-jumps', (created) => (db = created)));
  }, 200_000);
  afterEach(async () => killChildApps(), 30_000);
  afterAll(async () => db?.drop(), 30_000);

  const start = (
    names: string[],
    o: { handlerMs?: number; leaseSeconds?: number; env?: Record<string, string> },
  ) =>
    Promise.all(
      names.map((instance) =>
        startChildApp({ script, databaseUrl: db.url, instance, clockShift: true, ...o }),
      ),
    );
  const charge = (app: ChildApp, key: string) => send(app.url, '/charges', { key, body });
  const executions = async (key: string) =>
    (await db.dataSource.query(
      `SELECT instance FROM reliability_executions WHERE idempotency_key = $1 ORDER BY id`,
      [key],
    )) as { instance: string }[];

  it('a forward jump during a handler longer than the lease: it keeps renewing, the other instance never runs the key', async () => {
    const [a, b] = await start(['a', 'b'], { handlerMs: 6_000, leaseSeconds: 3 });
    const key = randomUUID();
    let done: RawResponse | undefined;
    const first = charge(a, key).then((res) => (done = res));
    await waitFor('the first execution', async () => (await executions(key)).length > 0, 5_000);
    await a.shiftClock(HOUR_MS);
    // Past the lease several times over, instance b is asked again and again.
    const during: string[] = [];
    while (!done) {
      const res = await charge(b, key);
      const replayed = res.headers['idempotent-replayed'] === 'true' ? 'replay ' : '';
      during.push(`${res.status} ${replayed}${res.status === 409 ? res.json().code : res.text}`);
      await sleep(250);
    }
    await first;
    expect(done.status).toBe(201);
    // A probe sent while a's completion commits may come back as the replay of a's response:
    // that is the right answer, but only as the last probe and only with a's exact bytes.
    if (during.at(-1) === `201 replay ${done.text}`) during.pop();
    expect(during.filter((d) => d !== '409 request_in_progress')).toEqual([]);
    expect(during.length).toBeGreaterThan(5);
    expect(await executions(key)).toEqual([{ instance: 'a' }]);
    expect(a.output()).not.toMatch(/no longer renewing|Lost the claim/);
  }, 60_000);

  it('a backward jump: the replay cache never outlives the record, the new execution replays', async () => {
    const [a, b] = await start(['a', 'b'], { env: { TTL_SECONDS: '3' } });
    const key = randomUUID();
    const original = await charge(a, key);
    expect(original.status).toBe(201);
    await a.shiftClock(-HOUR_MS);
    await waitFor(
      'the record to expire by the database clock',
      async () => (await db.records('idempotency_key = $1 AND expires_at <= now()', [key])).length,
      10_000,
    );
    const again = await charge(b, key);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    const replay = await charge(a, key);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(again.text);
    expect(await executions(key)).toEqual([{ instance: 'a' }, { instance: 'b' }]);
  }, 60_000);

  it.each([HOUR_MS, -HOUR_MS])(
    'replay audit stamps come from the database, with the app clock moved by %d ms',
    async (shiftMs) => {
      const [a] = await start(['a'], { env: { REPLAY_AUDIT_FLUSH_MS: '100' } });
      const key = randomUUID();
      expect((await charge(a, key)).status).toBe(201);
      await a.shiftClock(shiftMs);
      const [{ before }] = await db.dataSource.query(`SELECT now() AS before`);
      for (let i = 0; i < 2; i++) expect((await charge(a, key)).status).toBe(201);
      const [{ after }] = await db.dataSource.query(`SELECT now() AS after`);
      // The audit flushes every 100 ms: the two replays land in one row (count 2) or, when a
      // flush falls between them, in two rows of one each; the record counts both either way.
      const rows = await waitFor(
        'the replay audit rows of both replays',
        async () => {
          const found: AuditRow[] = await db.dataSource.query(
            `SELECT r.replay_count, r.first_replayed_at, r.replayed_at, k.last_replayed_at,
                    k.replay_count AS record_count
               FROM idempotency_keys_replays r JOIN idempotency_keys k ON k.id = r.record_id
              WHERE k.idempotency_key = $1`,
            [key],
          );
          const counted = found.reduce((n, r) => n + r.replay_count, 0);
          return counted >= 2 && found;
        },
        10_000,
      );
      const within = (t: Date) => ({
        t: t.toISOString(),
        ok: t.getTime() >= before.getTime() - 1 && t.getTime() <= after.getTime() + 5_000,
      });
      expect(rows.reduce((n, r) => n + r.replay_count, 0)).toBe(2);
      expect(rows.map((r) => r.record_count)).toEqual(rows.map(() => 2));
      for (const row of rows) {
        for (const t of [row.first_replayed_at, row.replayed_at, row.last_replayed_at]) {
          expect(within(t)).toEqual({ t: t.toISOString(), ok: true });
        }
        expect(row.first_replayed_at.getTime()).toBeLessThanOrEqual(row.replayed_at.getTime());
      }
    },
    60_000,
  );
});
