import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { IdempotencyCleanupService, IdempotencyModule, Idempotent } from '../../lib/index.js';
import { queryWithin } from '../../lib/store/postgres/pg-deadline.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { installOTelSdk } from '../fixtures/otel.fixture.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';

let release: () => void = () => undefined;
@Controller('pay')
class PayController {
  @Post()
  @Idempotent({ transactionId: (body: any) => body?.id })
  pay(@Body() body: { id: string }) {
    return { id: body.id };
  }

  @Post('slow')
  @Idempotent()
  async slow() {
    await new Promise<void>((resolve) => (release = resolve));
    return { ok: true };
  }
}

/** Every counter and the store histogram, read back through the SDK's in-memory exporter. */
describe('OpenTelemetry metrics', () => {
  const otel = installOTelSdk();
  let db: MigratedDatabase;
  let proxy: TcpProxy;
  let a: ListeningApp;
  const pay = (key: string, id: string) => send(a.url, '/pay', { key, body: { id } });

  beforeAll(async () => {
    db = await createMigratedDatabase('otel_metrics');
    proxy = TcpProxy.forUrl(db.url);
    await proxy.start();
    const dataSource = new DataSource({ type: 'postgres', url: proxy.wrap(db.url) });
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource,
          replayCache: { maxEntries: 1 }, // one completion evicts the other: replays from both
          // Audit events of a second record are dropped: keyB's replay, the mismatch, the 409.
          replayAuditMaxBuffered: 1,
          replayAuditFlushMs: 600_000,
          cleanup: { enabled: false, retentionSeconds: 0 },
        }),
      ],
      controllers: [PayController],
    })
    class AppModule {}
    a = await listenApp(AppModule);
  });
  afterAll(async () => {
    await a?.close();
    await proxy?.stop();
    await db?.drop();
    await otel.shutdown();
  });

  it('counts claims, executions, replays by source, refusals, audit drops', async () => {
    const [keyA, keyB] = [randomUUID(), randomUUID()];
    expect((await pay(keyA, 'a')).status).toBe(201);
    expect((await pay(keyB, 'b')).status).toBe(201);
    expect((await pay(keyA, 'a')).headers['idempotent-replayed']).toBe('true'); // evicted: PostgreSQL
    expect((await pay(keyA, 'a')).headers['idempotent-replayed']).toBe('true'); // cached again
    expect((await pay(keyB, 'b')).headers['idempotent-replayed']).toBe('true'); // PostgreSQL, audit full
    expect((await pay(keyA, 'other')).status).toBe(409);
    expect((await send(a.url, '/pay', { key: 'x'.repeat(300), body: { id: 'x' } })).status).toBe(
      400,
    );

    const keyC = randomUUID();
    const slow = send(a.url, '/pay/slow', { key: keyC });
    while ((await db.records('idempotency_key = $1', [keyC])).length === 0) await sleep(10);
    expect((await send(a.url, '/pay/slow', { key: keyC })).status).toBe(409);
    release();
    expect((await slow).status).toBe(201);

    expect(await otel.count('idempotency.claims', { 'idempotency.outcome': 'claimed' })).toBe(3);
    expect(await otel.count('idempotency.claims', { 'idempotency.outcome': 'completed' })).toBe(2);
    expect(
      await otel.count('idempotency.executions', { 'idempotency.endpoint': 'POST /pay' }),
    ).toBe(2);
    expect(
      await otel.count('idempotency.replays', { 'idempotency.replay.source': 'postgres' }),
    ).toBe(2);
    expect(await otel.count('idempotency.replays', { 'idempotency.replay.source': 'cache' })).toBe(
      1,
    );
    expect(await otel.count('idempotency.mismatches')).toBe(1);
    expect(
      await otel.count('idempotency.in_flight', { 'idempotency.endpoint': 'POST /pay/slow' }),
    ).toBe(1);
    expect(await otel.count('idempotency.audit.dropped')).toBe(3);
    const refusals = (code: string, status: number) =>
      otel.count('idempotency.refusals', {
        'idempotency.problem': code,
        'http.response.status_code': status,
      });
    expect(await refusals('idempotency_key_reused_with_different_params', 409)).toBe(1);
    expect(await refusals('request_in_progress', 409)).toBe(1);
    expect(await refusals('idempotency_key_invalid', 400)).toBe(1);
    const durations = await otel.histogramCounts(
      'idempotency.store.duration',
      'idempotency.statement',
    );
    expect(durations.claim).toBeGreaterThanOrEqual(6);
    expect(durations.complete).toBe(3);
  });

  it('times a statement once when pg answers it twice (a value that cannot be bound)', async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      const statement = { name: 'idem_bind_probe', text: 'SELECT $1::jsonb AS j' };
      // pg calls back with the bind error, then again once the server's ReadyForQuery arrives.
      await expect(
        queryWithin(client, { ...statement, values: [circular] }, 5_000),
      ).rejects.toThrow(/circular/i);
      const later = await queryWithin(client, { text: 'SELECT 1 AS n', values: [] }, 5_000);
      expect(later.rows).toEqual([{ n: 1 }]);
      const durations = await otel.histogramCounts(
        'idempotency.store.duration',
        'idempotency.statement',
      );
      expect(durations.bind_probe).toBe(1);
    } finally {
      await client.end();
    }
  });

  it('counts a lease takeover, a failed completion and its bytes-only retry', async () => {
    const keyD = randomUUID();
    await db.dataSource.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, owner_token, locked_until, expires_at)
       VALUES ($1, 'POST /pay', repeat('a', 64), 'in_progress', gen_random_uuid(), now() - interval '1 second', now() + interval '1 day')`,
      [keyD],
    );
    expect((await pay(keyD, 'd')).status).toBe(201);
    expect(await otel.count('idempotency.lease.takeovers')).toBe(1);

    // A full completion PostgreSQL refuses; the retry keeps only what a replay needs.
    await db.dataSource.query(`CREATE FUNCTION refuse_tx() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.transaction_id = 'tx_refused' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$`);
    await db.dataSource.query(
      'CREATE TRIGGER refuse_tx BEFORE UPDATE ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION refuse_tx()',
    );
    expect((await pay(randomUUID(), 'tx_refused')).status).toBe(201);
    expect(await otel.count('idempotency.completion.failures')).toBe(1);
    expect(await otel.count('idempotency.completion.retries')).toBe(1);
  });

  it('counts 503s (fail closed) and claims that failed', async () => {
    await proxy.cut();
    try {
      expect((await pay(randomUUID(), 'e')).status).toBe(503);
    } finally {
      await proxy.restore();
    }
    expect(
      await otel.count('idempotency.unavailable', {
        'idempotency.problem': 'idempotency_store_unavailable',
      }),
    ).toBe(1);
    expect(await otel.count('idempotency.claims', { 'idempotency.outcome': 'error' })).toBe(1);
  });

  it('counts rows deleted by cleanup, and runs skipped because another instance holds the lock', async () => {
    await db.dataSource.query(
      `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, expires_at)
       SELECT 'old' || g, 'POST /pay', repeat('a', 64), 'completed', now() - interval '1 hour' FROM generate_series(1, 2) g`,
    );
    const cleanup = a.app.get(IdempotencyCleanupService);
    expect(await cleanup.run()).toMatchObject({ ran: true, deleted: 2 });
    expect(await otel.count('idempotency.cleanup.deleted')).toBe(2);

    const lock = db.newDataSource();
    await lock.initialize();
    const runner = lock.createQueryRunner();
    await runner.query(`SELECT pg_advisory_lock(hashtextextended($1, 0))`, [
      'nestjs-pg-idempotency:cleanup:idempotency_keys',
    ]);
    try {
      expect(await cleanup.run()).toMatchObject({ ran: false });
    } finally {
      await runner.release();
      await lock.destroy();
    }
    expect(await otel.count('idempotency.cleanup.skipped')).toBe(1);
  });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
