/**
 * The last double-execution window: an app process SIGKILLed right after its card processor call,
 * before the completion. The processor (on loopback) deduplicates by idempotency key, and the
 * handler sends `ctx.keyFor('charge')`; in lease mode the call is also a `ctx.step()`. After the
 * lease (at once in single-commit mode, whose claim dies with the connection) the retry runs on
 * another instance: the card is charged exactly once and the client gets the first charge.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import type { MigratedDatabase } from '../fixtures/migrated-database.js';
import { send, type RawResponse } from '../fixtures/http-client.js';
import { FakeCardProcessor } from './card-processor.fake.js';
import {
  killChildApps,
  prepareChildRun,
  startChildApp,
  waitFor,
  type ChildApp,
} from './support.js';

const LEASE_SECONDS = 2;
type Mode = 'lease' | 'transactional' | 'single';

describe('SIGKILL after the card processor call, before the completion', () => {
  let db: MigratedDatabase;
  let script: string;
  const processor = new FakeCardProcessor();
  const survivors = new Map<Mode, ChildApp>();

  const start = (mode: Mode, instance: string, crash = '') =>
    startChildApp({
      script,
      databaseUrl: db.url,
      instance,
      leaseSeconds: LEASE_SECONDS,
      env: { MODE: mode, CRASH: crash, PROCESSOR_URL: processor.url },
    });

  beforeAll(async () => {
    const built = await prepareChildRun('recovery', (created) => (db = created));
    script = join(dirname(built.script), 'recovery-server.js');
    await processor.start();
    for (const mode of ['lease', 'transactional', 'single'] as const) {
      survivors.set(mode, await start(mode, `survivor-${mode}`));
    }
  }, 200_000);
  afterAll(async () => {
    await killChildApps();
    await processor.stop();
    await db?.drop();
  }, 30_000);

  const record = async (key: string) =>
    (
      await db.dataSource.query(
        `SELECT k.runs, k.status, s.run AS step_run, s.resumed_count
           FROM idempotency_keys k LEFT JOIN idempotency_keys_steps s ON s.record_id = k.id
          WHERE k.idempotency_key = $1`,
        [key],
      )
    )[0];

  it.each<[Mode, string]>([
    ['lease', 'after-charge'],
    ['lease', 'in-step'],
    ['transactional', 'after-charge'],
    ['single', 'after-charge'],
  ])(
    '%s mode, killed %s: one charge, the retry gets it',
    async (mode, crash) => {
      const survivor = survivors.get(mode)!;
      const doomed = await start(mode, `doomed-${mode}-${crash}`, crash);
      const seen = new Set(processor.calls.keys());
      const key = randomUUID();
      const body = { amount: 1999, currency: 'eur' };

      const first = await send(doomed.url, '/charges', { key, body }).then(
        (res) => res.status,
        () => 'connection lost',
      );
      expect(first).toBe('connection lost');
      expect(await doomed.exited).toBe('SIGKILL');

      // 409 while the dead run's lease holds; then one retry runs (or resumes) it.
      const answer = await waitFor<RawResponse>(
        'a retry that is not refused as in progress',
        async () => {
          const res = await send(survivor.url, '/charges', { key, body });
          return res.status === 409 ? null : res;
        },
        30_000,
        200,
      );
      expect(answer.status).toBe(201);

      const derived = processor.keysSince(seen);
      expect(derived).toHaveLength(1);
      expect(derived[0]).toMatch(/^[0-9a-f]{64}$/);
      expect(processor.charges.get(derived[0])).toHaveLength(1);
      expect(answer.json().charge).toEqual(processor.charges.get(derived[0])![0]);
      // A committed step is not called again; otherwise the processor deduplicated the retry.
      const resumedStep = mode === 'lease' && crash === 'after-charge';
      expect(processor.calls.get(derived[0])).toBe(resumedStep ? 1 : 2);

      const row = await record(key);
      expect(row.status).toBe('completed');
      expect(row.runs).toBe(mode === 'single' ? 1 : 2);
      expect(answer.json().run).toBe(row.runs);
      if (mode === 'lease') {
        expect(row).toMatchObject(
          resumedStep ? { step_run: 1, resumed_count: 1 } : { step_run: 2, resumed_count: 0 },
        );
      }
      const replay = await send(survivor.url, '/charges', { key, body });
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body.equals(answer.body)).toBe(true);
    },
    60_000,
  );
});
