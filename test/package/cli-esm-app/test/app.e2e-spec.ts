// The CLI's e2e test, for the quick start: vitest compiles the decorators (no swc, no jest).
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { AppModule } from '../src/app.module.js';

describe('POST /payments (e2e)', () => {
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    url = await app.getUrl();
  });
  afterAll(async () => app?.close());

  it('replays a retry byte for byte', async () => {
    const key = randomUUID();
    const post = () =>
      fetch(`${url}/payments`, {
        method: 'POST',
        headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
        body: JSON.stringify({ amount: 500, currency: 'eur' }),
      });
    const first = await post();
    const second = await post();
    expect(first.status).toBe(201);
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(await second.text()).toBe(await first.text());
  });
});
