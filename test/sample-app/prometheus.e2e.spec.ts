import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { AppModule, configureApp } from '../../sample-app/src/app.module.js';
import { startPrometheus } from '../../sample-app/src/telemetry.js';
import { send } from '../fixtures/http-client.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });

/** `OTEL_EXPORTER_PROMETHEUS_PORT=9464 npm start`: the library's metrics, scraped as Prometheus does. */
describe('sample-app: Prometheus endpoint', () => {
  let db: TestDatabase;
  let app: INestApplication;
  let url: string;
  let metricsUrl: string;
  let stopMetrics: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
    const env = { OTEL_EXPORTER_PROMETHEUS_PORT: String(port) };
    stopMetrics = await startPrometheus({ log: () => undefined }, env);
    db = await createTestDatabase('sample_prom');
    const module = AppModule.forRoot({ databaseUrl: db.url, slowMs: 0 });
    app = configureApp(await NestFactory.create(module, { logger: false }));
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await stopMetrics?.();
    await db?.drop();
  });

  it('is off without the variable', async () => {
    expect(await startPrometheus({ log: () => undefined }, {})).toBeUndefined();
  });

  it('serves claims, replays and store latency per statement', async () => {
    const key = randomUUID();
    const body = { amount: 1999, currency: 'eur', source: 'tok_visa' };
    const headers: [string, string][] = [['Authorization', 'Bearer alice']];
    expect((await send(url, '/payments', { key, body, headers })).status).toBe(201);
    expect((await send(url, '/payments', { key, body, headers })).status).toBe(201);
    const text = await (await fetch(metricsUrl)).text();
    expect(text).toMatch(/^idempotency_claims_total\{.*idempotency_outcome="claimed".*\} 1$/m);
    expect(text).toMatch(/^idempotency_replays_total\{.*idempotency_replay_source="cache".*\} 1$/m);
    const latency = (series: string, label = '') =>
      new RegExp(
        `^idempotency_store_duration_${series}\\{.*statement="claim".*${label}\\} 1$`,
        'm',
      );
    expect(text).toMatch(latency('count'));
    // Buckets fit seconds (the SDK's default ones, up to 10 000, are made for milliseconds).
    expect(text).toMatch(latency('bucket', 'le="1"'));
  });
});
