import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import pg from 'pg';
import { ReplayAuditService } from '../../lib/execution/replay-audit.service.js';
import type { IdempotencyModuleOptions } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { startFixtureApp, type FixtureApp, type Platform } from '../fixtures/payments.fixture.js';

/** Only replays that reached the client count as deduplications (issue 16.4). */
describe.each<Platform>(['express', 'fastify'])(
  'replays counted once delivered on %s',
  (platform) => {
    let db: MigratedDatabase;
    const q = (sql: string, params: unknown[] = []) => db.dataSource.query(sql, params);
    beforeAll(async () => {
      db = await createMigratedDatabase(`delivered_${platform}`);
    });
    afterAll(async () => db?.drop());

    async function withApp<T>(
      options: Partial<IdempotencyModuleOptions>,
      run: (f: FixtureApp) => T,
    ) {
      const f = await startFixtureApp({
        platform,
        dataSource: db.dataSource,
        options: { replayCache: false, replayAuditFlushMs: 60_000, ...options },
      });
      try {
        return await run(f);
      } finally {
        await f.close();
      }
    }
    const flush = (f: FixtureApp) => f.app.get(ReplayAuditService).flush();
    const replayCount = async (key: string) =>
      (await db.records('idempotency_key = $1', [key]))[0].replay_count as number;
    async function until(check: () => Promise<boolean>) {
      const deadline = Date.now() + 10_000;
      while (!(await check())) {
        if (Date.now() > deadline) throw new Error('condition not met in 10 s');
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    const connections = (f: FixtureApp) =>
      new Promise<number>((resolve, reject) =>
        f.app
          .getHttpServer()
          .getConnections((err: Error | null, n: number) => (err ? reject(err) : resolve(n))),
      );

    it('does not count a replay whose client went away before it was written', async () => {
      await withApp({}, async (f) => {
        const key = randomUUID();
        const body = JSON.stringify({ amount: 5 });
        expect((await send(f.url, '/charges', { key, body: { amount: 5 } })).status).toBe(201);
        // Hold the claim statement: the retry waits in PostgreSQL while its client leaves.
        const lock = new pg.Client({ connectionString: db.url });
        await lock.connect();
        try {
          await lock.query('BEGIN');
          await lock.query('LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE');
          const open = await connections(f);
          const socket = connect(new URL(f.url).port as unknown as number, '127.0.0.1');
          socket.on('error', () => undefined);
          socket.write(
            `POST /charges HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
          );
          await until(
            async () =>
              (
                await q(
                  `SELECT count(*)::int AS n FROM pg_stat_activity
                  WHERE wait_event_type = 'Lock' AND datname = current_database()`,
                )
              )[0].n === 1,
          );
          socket.destroy();
          await until(async () => (await connections(f)) === open);
          await lock.query('COMMIT');
        } finally {
          await lock.end();
        }
        // A retry that is answered: it counts.
        const delivered = await send(f.url, '/charges', { key, body: { amount: 5 } });
        expect(delivered.headers['idempotent-replayed']).toBe('true');
        await flush(f);
        expect(await replayCount(key)).toBe(1);
      });
    });

    it('counts a 409 for a retired encryption key as not replayable, never as a replay', async () => {
      const key = randomUUID();
      const keyA = randomBytes(32);
      await withApp({ encryption: { keys: { A: keyA }, activeKeyId: 'A' } }, async (f) => {
        expect((await send(f.url, '/created', { key })).status).toBe(201);
      });
      await withApp(
        { encryption: { keys: { B: randomBytes(32) }, activeKeyId: 'B' } },
        async (f) => {
          const retry = await send(f.url, '/created', { key });
          expect([retry.status, retry.json().code]).toEqual([
            409,
            'idempotency_response_not_replayable',
          ]);
          await flush(f);
        },
      );
      expect(await replayCount(key)).toBe(0);
      const [record] = await db.records('idempotency_key = $1', [key]);
      expect(
        await q(`SELECT replays FROM idempotency_keys_deduplications WHERE record_id = $1`, [
          record.id,
        ]),
      ).toEqual([]);
      expect(
        await q(`SELECT not_replayable FROM idempotency_keys_conflicts WHERE record_id = $1`, [
          record.id,
        ]),
      ).toEqual([{ not_replayable: 1 }]);
    });
  },
);
