/**
 * An app process killed with SIGKILL in the middle of a slow handler: nothing runs on the way
 * out, so its claim stays in progress. Another instance must refuse the key (409) while the dead
 * claim's lease holds, take it over once the lease ended (one more execution, completed), and
 * replay from then on. Real processes: the child app of test/reliability/child/, compiled by tsc.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import {
  killChildApps,
  prepareChildRun,
  startChildApp,
  waitFor,
  type ChildApp,
} from './support.js';

const LEASE_SECONDS = 2;

describe('app process SIGKILLed in the middle of a slow handler', () => {
  let db: MigratedDatabase;
  let doomed: ChildApp;
  let survivor: ChildApp;

  beforeAll(async () => {
    const { script } = await prepareChildRun('sigkill', (created) => (db = created));
    const common = { script, databaseUrl: db.url, leaseSeconds: LEASE_SECONDS };
    [doomed, survivor] = await Promise.all([
      startChildApp({ ...common, instance: 'doomed', handlerMs: 30_000 }),
      startChildApp({ ...common, instance: 'survivor', handlerMs: 100 }),
    ]);
  }, 200_000);
  afterAll(async () => {
    await killChildApps();
    await db?.drop();
  }, 30_000);

  const sql = (text: string, params: unknown[] = []) => db.dataSource.query(text, params);
  const executions = (key: string) =>
    sql(`SELECT instance FROM reliability_executions WHERE idempotency_key = $1 ORDER BY id`, [
      key,
    ]);
  const leaseRemainingMs = async (key: string): Promise<number> =>
    (
      await sql(
        `SELECT (extract(epoch FROM locked_until - now()) * 1000)::float8 AS ms
           FROM idempotency_keys WHERE idempotency_key = $1`,
        [key],
      )
    )[0].ms;

  it('refuses the key while the dead claim holds its lease, then takes it over once and replays', async () => {
    const key = randomUUID();
    const body = { amount: 1999, currency: 'eur' };

    // The doomed instance claims the key and starts its 30 s handler.
    const original = send(doomed.url, '/charges', { key, body }).then(
      (res) => ({ status: res.status }),
      (error: Error) => ({ error: error.message }),
    );
    await waitFor(
      'the handler to start',
      async () => (await executions(key)).length === 1,
      10_000,
      20,
    );
    const [claim] = await db.records('idempotency_key = $1', [key]);
    expect(claim).toMatchObject({ status: 'in_progress' });

    // SIGKILL: no shutdown hook, no release, no completion. The client loses its connection.
    const killedAt = performance.now();
    expect(await doomed.kill('SIGKILL')).toBe('SIGKILL');
    expect(await original).toEqual({ error: expect.any(String) });

    // Before the lease ends: the other instance says 409 request_in_progress, and runs nothing.
    const early = await send(survivor.url, '/charges', { key, body });
    // Read after the answer, so the retry's claim certainly came before the lease ended.
    const remainingAtRetryMs = await leaseRemainingMs(key);
    expect(remainingAtRetryMs).toBeGreaterThan(0);
    expect(early.status).toBe(409);
    expect(early.headers['retry-after']).toBe('2');
    expect(early.json()).toMatchObject({ status: 409, code: 'request_in_progress' });
    expect(await executions(key)).toEqual([{ instance: 'doomed' }]);

    // After the lease (database clock): the retry takes the claim over and runs the handler once.
    await waitFor(
      'the dead lease to end',
      async () => (await leaseRemainingMs(key)) <= 0,
      2_000 * LEASE_SECONDS,
    );
    const takeover = await send(survivor.url, '/charges', { key, body });
    const takeoverAfterMs = performance.now() - killedAt;
    expect(takeover.status).toBe(201);
    expect(takeover.headers['idempotent-replayed']).toBeUndefined();
    expect(takeover.json()).toMatchObject({ instance: 'survivor' });

    // A further retry replays those bytes; the handler ran exactly twice (killed + takeover).
    const replay = await send(survivor.url, '/charges', { key, body });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(takeover.body)).toBe(true);
    expect(await executions(key)).toEqual([{ instance: 'doomed' }, { instance: 'survivor' }]);

    const [record] = await db.records('idempotency_key = $1', [key]);
    expect(record).toMatchObject({ status: 'completed', status_code: 201 });
    expect(record.response_raw.equals(takeover.body)).toBe(true);
    expect(record.id).not.toBe(claim.id);
    // The dead claim is kept for audit under its original id.
    expect(
      await sql(`SELECT id, status FROM idempotency_keys_archive WHERE idempotency_key = $1`, [
        key,
      ]),
    ).toEqual([{ id: claim.id, status: 'in_progress' }]);

    console.log(
      `[sigkill] lease ${LEASE_SECONDS} s: killed pid ${doomed.pid} mid-handler (client got: ${((await original) as { error: string }).error});` +
        ` retry answered ${remainingAtRetryMs.toFixed(0)} ms before the lease end -> ${early.status} ${early.json().code};` +
        ` takeover ${takeoverAfterMs.toFixed(0)} ms after the kill -> ${takeover.status} ${takeover.text}; replay -> ${replay.status} (same bytes);` +
        ` executions ${JSON.stringify((await executions(key)).map((r: { instance: string }) => r.instance))}`,
    );
  }, 60_000);
});

/**
 * The same kill on a single-commit route (`transactional: 'single'`): the claim was never
 * committed, so the dying connection rolls it back with the handler's writes, and the key is
 * free at once: no lease to wait for (the lease here is 60 s and plays no part).
 */
describe('app process SIGKILLed in the middle of a slow single-commit handler', () => {
  let db: MigratedDatabase;
  let doomed: ChildApp;
  let survivor: ChildApp;

  beforeAll(async () => {
    const { script } = await prepareChildRun('sigkill-single', (created) => (db = created));
    const common = { script, databaseUrl: db.url, leaseSeconds: 60, mode: 'single' as const };
    [doomed, survivor] = await Promise.all([
      startChildApp({ ...common, instance: 'doomed', handlerMs: 30_000 }),
      startChildApp({ ...common, instance: 'survivor', handlerMs: 100 }),
    ]);
  }, 200_000);
  afterAll(async () => {
    await killChildApps();
    await db?.drop();
  }, 30_000);

  const sql = (text: string, params: unknown[] = []) => db.dataSource.query(text, params);

  it('refuses the key while the handler runs, then runs it once more right after the kill', async () => {
    const key = randomUUID();
    const body = { amount: 1999, currency: 'eur' };
    const original = send(doomed.url, '/charges', { key, body }).then(
      (res) => ({ status: res.status }),
      (error: Error) => ({ error: error.message }),
    );
    // The handler's row is uncommitted: wait until its transaction holds the scope.
    await waitFor(
      'the handler to start',
      async () =>
        (
          await sql(
            `SELECT 1 FROM pg_stat_activity WHERE application_name = 'reliability-doomed' AND state = 'idle in transaction'`,
          )
        ).length === 1,
      10_000,
      20,
    );
    const during = await send(survivor.url, '/charges', { key, body });
    expect(during.status).toBe(409);
    expect(await db.records('idempotency_key = $1', [key])).toEqual([]);

    const killedAt = performance.now();
    expect(await doomed.kill('SIGKILL')).toBe('SIGKILL');
    expect(await original).toEqual({ error: expect.any(String) });
    // PostgreSQL sees the connection drop and rolls back: the retry runs without any lease wait.
    const retry = await waitFor(
      'a retry to run',
      async () => {
        const res = await send(survivor.url, '/charges', { key, body });
        return res.status === 201 ? res : res.status === 409 ? null : Promise.reject(res.status);
      },
      5_000,
      20,
    );
    const freedAfterMs = performance.now() - killedAt;
    expect(freedAfterMs).toBeLessThan(2_000);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expect(retry.json()).toMatchObject({ instance: 'survivor' });
    const replay = await send(survivor.url, '/charges', { key, body });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(retry.body)).toBe(true);
    // Only the committed execution is left: the killed one's row was rolled back.
    expect(
      await sql(`SELECT instance FROM reliability_executions WHERE idempotency_key = $1`, [key]),
    ).toEqual([{ instance: 'survivor' }]);
    expect(
      await sql(`SELECT id FROM idempotency_keys_archive WHERE idempotency_key = $1`, [key]),
    ).toEqual([]);
    console.log(`[sigkill single-commit] key free ${freedAfterMs.toFixed(0)} ms after the kill`);
  }, 60_000);
});
