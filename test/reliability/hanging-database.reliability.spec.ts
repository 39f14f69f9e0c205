/**
 * PostgreSQL hangs: connections stay open, nothing is answered (TcpProxy.blackhole, like a stopped
 * server or a silent network). Keyed requests must get `503 idempotency_store_unavailable` within
 * about `statementTimeoutMs`, never run the handler, and work again once PostgreSQL answers; the
 * replay audit must stay within `replayAuditMaxBuffered`, count and report what it drops, and
 * write again afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../lib/index.js';
import { ReplayAuditService } from '../../lib/execution/replay-audit.service.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { LogCapture } from '../fixtures/log-capture.js';
import { startFixtureApp, type FixtureApp, type Platform } from '../fixtures/payments.fixture.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';
import { runPool, sleep, waitFor } from './support.js';

const TIMEOUT_MS = 1_000;
const FLUSH_MS = 200;
const AUDIT_BOUND = 300;

describe.each<Platform>(['express', 'fastify'])('PostgreSQL hangs (%s)', (platform) => {
  let db: MigratedDatabase;
  let proxy: TcpProxy;
  let f: FixtureApp;
  let appDataSource: DataSource | undefined;
  const logs = new LogCapture();

  beforeAll(async () => {
    db = await createMigratedDatabase(`rel_hang_${platform}`);
    proxy = TcpProxy.forUrl(db.url);
    await proxy.start();
    // The app reaches PostgreSQL only through the proxy, with no connect timeout of its own:
    // the library's deadline alone must bound every wait.
    appDataSource = new DataSource({
      type: 'postgres',
      url: proxy.wrap(db.url),
      poolErrorHandler: () => undefined,
    });
    f = await startFixtureApp({
      platform,
      dataSource: appDataSource,
      logger: logs,
      options: {
        statementTimeoutMs: TIMEOUT_MS,
        replayAuditFlushMs: FLUSH_MS,
        replayAuditMaxBuffered: AUDIT_BOUND,
      },
    });
  }, 30_000);
  afterAll(async () => {
    proxy?.resume();
    await f?.close();
    if (appDataSource?.isInitialized) await appDataSource.destroy();
    await proxy?.stop();
    await db?.drop();
  }, 30_000);

  it('answers 503 with Retry-After within about statementTimeoutMs, never runs the handler, and recovers', async () => {
    const warm = randomUUID();
    expect((await send(f.url, '/charges', { key: warm, body: { key: warm } })).status).toBe(201);

    proxy.blackhole();
    // More at once than the pool has connections (10): the wait for a connection is bounded too.
    const keys = Array.from({ length: 15 }, () => randomUUID());
    const down = await Promise.all(
      keys.map(async (key) => {
        const started = Date.now();
        const res = await send(f.url, '/charges', { key, body: { key } });
        return { res, ms: Date.now() - started };
      }),
    );
    for (const { res, ms } of down) {
      expect(res.status).toBe(503);
      expect(res.headers['retry-after']).toBe('2');
      expect(res.json()).toMatchObject({ code: 'idempotency_store_unavailable' });
      expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      expect(ms).toBeLessThan(TIMEOUT_MS + 2_000);
    }
    for (const key of keys) expect(f.exec.count('charge', key)).toBe(0);

    proxy.resume();
    const fresh = randomUUID();
    expect((await send(f.url, '/charges', { key: fresh, body: { key: fresh } })).status).toBe(201);
    // A claim given up on was still in the socket when PostgreSQL woke up, so it may have been
    // committed after all: that key answers 409 until its lease ends (docs/limits-and-choices.md).
    // Either way the operation never runs twice.
    for (const key of keys) {
      const up = await send(f.url, '/charges', { key, body: { key } });
      if (up.status === 409) {
        expect(up.json().code).toBe('request_in_progress');
        expect(f.exec.count('charge', key)).toBe(0);
      } else {
        expect(up.status).toBe(201);
        expect(f.exec.count('charge', key)).toBe(1);
      }
    }
  });

  it('bounds the completion write too: the handler ran, so its response goes out within about statementTimeoutMs', async () => {
    const key = randomUUID();
    const started = Date.now();
    const pending = send(f.url, '/slow', { key, body: { ms: 600, key } });
    await waitFor('the handler to start', async () => f.exec.count('slow', key) === 1, 5_000, 10);
    proxy.blackhole();
    const res = await pending;
    const ms = Date.now() - started;
    expect(res.status).toBe(201);
    expect(res.json()).toEqual({ done: expect.any(Number) });
    expect(ms).toBeLessThan(600 + TIMEOUT_MS + 2_000);
    proxy.resume();
    // The claim stays (or the late completion landed after all): a retry never runs it again.
    const retry = await send(f.url, '/slow', { key, body: { ms: 600, key } });
    expect([200, 201, 409]).toContain(retry.status);
    expect(f.exec.count('slow', key)).toBe(1);
  });

  it('keeps the replay audit within replayAuditMaxBuffered records while writes hang, reports drops once per interval, then writes again', async () => {
    const audit = f.app.get(ReplayAuditService);
    // Replays of one record are one counter in memory, so only many records can fill the buffer.
    const keys = Array.from({ length: AUDIT_BOUND * 2 }, () => randomUUID());
    await runPool(keys, 8, async (key) => {
      expect((await send(f.url, '/charges', { key, body: { key } })).status).toBe(201);
    });
    await audit.flush();
    const before = audit.counts;

    // Replays come from the in-process replay cache, so they keep being answered (and audited)
    // while PostgreSQL hangs: exactly the traffic that used to grow the queue without bound.
    proxy.blackhole();
    let maxPending = 0;
    const replays = keys.length + 50;
    const started = Date.now();
    await runPool([...keys, ...keys.slice(0, 50)], 8, async (key) => {
      const res = await send(f.url, '/charges', { key, body: { key } });
      expect(res.headers['idempotent-replayed']).toBe('true');
      maxPending = Math.max(maxPending, audit.counts.pendingRecords);
    });
    const driveMs = Date.now() - started;
    expect(maxPending).toBe(AUDIT_BOUND);
    const dropped = audit.counts.dropped - before.dropped;
    expect(dropped).toBeGreaterThan(0);

    // Each interval reports what it dropped in one line, not one line per event.
    await sleep(FLUSH_MS * 2);
    const reports = logs
      .of('IdempotencyReplayAudit', 'warn')
      .map((l) => /^Dropped (\d+) replay audit events/.exec(l.message))
      .filter((m) => m !== null);
    expect(reports.reduce((sum, m) => sum + Number(m[1]), 0)).toBe(audit.counts.dropped);
    expect(reports.length).toBeLessThanOrEqual(Math.ceil((driveMs + FLUSH_MS * 2) / FLUSH_MS) + 1);

    proxy.resume();
    await waitFor('the audit to drain', async () => audit.counts.pending === 0, 10_000);
    await audit.flush();
    const lost = audit.counts.lost - before.lost;
    const total = async () =>
      (
        await db.dataSource.query(
          'SELECT sum(replay_count)::int AS n FROM idempotency_keys WHERE idempotency_key = ANY($1)',
          [keys],
        )
      )[0].n as number;
    const written = await total();
    // A batch given up on may still have reached PostgreSQL once it answered again.
    expect(written).toBeGreaterThanOrEqual(replays - dropped - lost);
    expect(written).toBeLessThanOrEqual(replays - dropped);

    await send(f.url, '/charges', { key: keys[0], body: { key: keys[0] } });
    await audit.flush();
    expect(await total()).toBe(written + 1);
  });
});

describe.each([true, 'single'] as const)(
  'PostgreSQL hangs before a transactional completion (transactional: %s)',
  (mode) => {
    let db: MigratedDatabase;
    let proxy: TcpProxy;
    let url: string;
    let close: (() => Promise<void>) | undefined;
    let runs = 0;

    beforeAll(async () => {
      db = await createMigratedDatabase(`rel_hang_tx_${mode}`);
      await db.dataSource.query(
        `CREATE TABLE ledger (id bigserial PRIMARY KEY, ref text NOT NULL)`,
      );
      proxy = TcpProxy.forUrl(db.url);
      await proxy.start();
      const dataSource = new DataSource({
        type: 'postgres',
        url: proxy.wrap(db.url),
        poolErrorHandler: () => undefined,
      });
      @Controller('ledger')
      class LedgerController {
        @Post()
        @Idempotent({ transactional: mode })
        async charge(@Body() body: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
          runs++;
          await idem.manager!.query(`INSERT INTO ledger (ref) VALUES ($1)`, [body.ref]);
          proxy.blackhole(); // the completion UPDATE on this transaction gets no answer
          return { ref: body.ref };
        }
      }
      @Module({
        imports: [
          IdempotencyModule.forRoot({
            dataSource,
            statementTimeoutMs: TIMEOUT_MS,
            cleanup: { enabled: false },
          }),
        ],
        controllers: [LedgerController],
      })
      class AppModule {}
      ({ url, close } = await listenApp(AppModule));
    }, 30_000);
    afterAll(async () => {
      proxy?.resume();
      await close?.();
      await proxy?.stop();
      await db?.drop();
    }, 30_000);

    it('answers 503 within about twice statementTimeoutMs (completion, then release) and commits nothing', async () => {
      const key = randomUUID();
      const started = Date.now();
      const res = await send(url, '/ledger', { key, body: { ref: key } });
      expect(res.status).toBe(503);
      expect(res.json()).toMatchObject({ code: 'idempotency_store_unavailable' });
      expect(res.headers['retry-after']).toBeDefined();
      // Say only what is known: a client told "rolled back" that retries with a new key pays twice.
      if (mode === true) {
        // The COMMIT was never sent: nothing can have committed.
        expect(res.json().detail).toMatch(/rolled back/);
      } else {
        expect(res.json()).toMatchObject({ outcome: 'unknown' });
        expect(res.json().detail).toMatch(/outcome of the operation is unknown/);
        expect(res.json().detail).toMatch(/retry with the same (idempotency )?key/i);
        expect(res.json().detail).not.toMatch(/rolled back/);
      }
      expect(Date.now() - started).toBeLessThan(2 * TIMEOUT_MS + 2_000);
      expect(runs).toBe(1);
      proxy.resume();
      await sleep(200);
      const ledger = await db.dataSource.query('SELECT ref FROM ledger WHERE ref = $1', [key]);
      const records = await db.records('idempotency_key = $1', [key]);
      if (mode === true) {
        // The completion never reached PostgreSQL before the connection closed: nothing committed.
        expect(ledger).toEqual([]);
      } else {
        // Single-commit sends the record with its COMMIT: whether that COMMIT ran when the bytes
        // finally arrived, the client cannot know (as with any COMMIT that times out). What holds
        // is atomicity: the writes and the completed record exist together or not at all, so a
        // retry replays the committed outcome or runs the operation again.
        expect(records.map((r) => r.status)).toEqual(ledger.length === 1 ? ['completed'] : []);
      }
    });

    it('answers 503 within about statementTimeoutMs when the claim hangs, and never runs the handler', async () => {
      proxy.resume();
      const before = runs;
      proxy.blackhole();
      const started = Date.now();
      const res = await send(url, '/ledger', { key: randomUUID(), body: { ref: 'never' } });
      expect(res.status).toBe(503);
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 2_000);
      expect(runs).toBe(before);
      proxy.resume();
    });
  },
);
