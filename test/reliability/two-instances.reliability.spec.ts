/**
 * Two app processes against one database, each receiving the same keys at the same moment:
 * every key's handler must run exactly once in total (counted in a table both processes write),
 * and every answer for a key must be the bytes of that one execution, or a 409.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import {
  killChildApps,
  prepareChildRun,
  runPool,
  startChildApp,
  tally,
  type ChildApp,
} from './support.js';

const KEYS = 200;
/** Per key, this many requests to each instance, all sent at the same moment. */
const BURST_PER_INSTANCE = 3;
/** Keys in flight at once (each with 2 × BURST_PER_INSTANCE requests). */
const KEY_CONCURRENCY = 8;
const HANDLER_MS = 20;

interface Answer {
  key: string;
  instance: string;
  status: number;
  code?: string;
  replayed: boolean;
  body: Buffer;
}

describe.each(['lease', 'single'] as const)(
  'two app instances, one database, the same keys at the same time (%s)',
  (mode) => {
    let db: MigratedDatabase;
    let instances: ChildApp[] = [];

    beforeAll(async () => {
      const { script } = await prepareChildRun(
        `two-instances-${mode}`,
        (created) => (db = created),
      );
      instances = await Promise.all(
        ['a', 'b'].map((instance) =>
          startChildApp({ script, databaseUrl: db.url, instance, handlerMs: HANDLER_MS, mode }),
        ),
      );
    }, 200_000);
    afterAll(async () => {
      await killChildApps();
      await db?.drop();
    }, 30_000);

    const call = async (instance: ChildApp, key: string): Promise<Answer> => {
      const res = await send(instance.url, '/charges', {
        key,
        body: { amount: 500, currency: 'eur' },
      });
      const problem = (res.headers['content-type'] ?? '').includes('problem+json');
      return {
        key,
        instance: instance.instance,
        status: res.status,
        code: problem ? res.json().code : undefined,
        replayed: res.headers['idempotent-replayed'] === 'true',
        body: res.body,
      };
    };
    const label = (a: Answer) =>
      a.status === 201
        ? a.replayed
          ? '201 replay'
          : '201 first'
        : `${a.status} ${a.code ?? ''}`.trim();

    it('runs every key exactly once in total, and answers the same bytes or 409', async () => {
      const keys = Array.from({ length: KEYS }, () => randomUUID());
      const startedAt = performance.now();
      const bursts = await runPool(keys, KEY_CONCURRENCY, (key) =>
        Promise.all(
          Array.from({ length: BURST_PER_INSTANCE }).flatMap(() =>
            instances.map((i) => call(i, key)),
          ),
        ),
      );
      const burstMs = performance.now() - startedAt;
      // Afterwards, once more on each instance: every key must now replay.
      const afterwards = await runPool(keys, KEY_CONCURRENCY, (key) =>
        Promise.all(instances.map((i) => call(i, key))),
      );

      const runs = new Map<string, string[]>();
      for (const row of await db.dataSource.query(
        `SELECT idempotency_key, instance FROM reliability_executions ORDER BY id`,
      )) {
        runs.set(row.idempotency_key, [...(runs.get(row.idempotency_key) ?? []), row.instance]);
      }
      const records = new Map((await db.records()).map((r) => [r.idempotency_key as string, r]));

      const violations: string[] = [];
      keys.forEach((key, k) => {
        const ran = runs.get(key) ?? [];
        if (ran.length !== 1)
          violations.push(`${key}: ran ${ran.length} times (${ran.join(', ')})`);
        const answers = [...bursts[k], ...afterwards[k]];
        const ok = answers.filter((a) => a.status === 201);
        for (const a of answers) {
          if (a.status !== 201 && !(a.status === 409 && a.code === 'request_in_progress')) {
            violations.push(`${key}: instance ${a.instance} answered ${label(a)}`);
          }
        }
        if (ok.filter((a) => !a.replayed).length !== 1)
          violations.push(`${key}: ${ok.filter((a) => !a.replayed).length} first answers`);
        const record = records.get(key);
        if (record?.status !== 'completed') violations.push(`${key}: record ${record?.status}`);
        for (const a of ok) {
          if (!a.body.equals(record?.response_raw ?? Buffer.alloc(0))) {
            violations.push(
              `${key}: instance ${a.instance} answered other bytes: ${a.body.toString()}`,
            );
          }
        }
        for (const a of afterwards[k]) {
          if (label(a) !== '201 replay')
            violations.push(`${key}: afterwards ${a.instance} answered ${label(a)}`);
        }
      });
      expect(violations).toEqual([]);
      expect(runs.size).toBe(KEYS);

      const all = bursts.flat();
      const winners = tally(keys.map((key) => runs.get(key)?.[0] ?? 'none'));
      console.log(
        [
          `[two-instances ${mode}] ${KEYS} keys × ${2 * BURST_PER_INSTANCE} simultaneous requests (${BURST_PER_INSTANCE} per instance), ${KEY_CONCURRENCY} keys in flight, handler ${HANDLER_MS} ms: ${all.length} requests in ${Math.round(burstMs)} ms`,
          `[two-instances ${mode}] answers: ${JSON.stringify(tally(all.map(label)))}; per instance: a ${JSON.stringify(tally(all.filter((x) => x.instance === 'a').map(label)))}, b ${JSON.stringify(tally(all.filter((x) => x.instance === 'b').map(label)))}`,
          `[two-instances ${mode}] executions: ${[...runs.values()].reduce((n, r) => n + r.length, 0)} for ${KEYS} keys (won by ${JSON.stringify(winners)}); afterwards ${JSON.stringify(tally(afterwards.flat().map(label)))}`,
        ].join('\n'),
      );
    }, 60_000);
  },
);
