import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { context, trace } from '@opentelemetry/api';
import express from 'express';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { IdempotencyModule, Idempotent } from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { installOTelSdk } from '../fixtures/otel.fixture.js';

@Controller('pay')
class PayController {
  @Post()
  @Idempotent({ transactionId: (body: any) => body?.id })
  pay(@Body() body: { amount: number }) {
    return { id: `pay_${randomUUID()}`, amount: body.amount };
  }
}

/** Spans around claim and completion, children of the request's span (as HTTP instrumentation makes it). */
describe('OpenTelemetry traces', () => {
  const otel = installOTelSdk();
  let db: MigratedDatabase;
  let close: () => Promise<void>;
  let url: string;

  beforeAll(async () => {
    db = await createMigratedDatabase('otel_traces');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [PayController],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false, bodyParser: false });
    app.use(express.json());
    // What @opentelemetry/instrumentation-http does: the request runs in its span's context.
    app.use((req: unknown, res: { on(e: string, f: () => void): void }, next: () => void) => {
      const span = trace.getTracer('test').startSpan('POST /pay');
      res.on('finish', () => span.end());
      context.with(trace.setSpan(context.active(), span), next);
    });
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    close = () => app.close();
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
    await otel.shutdown();
  });

  it('claim and completion spans share the request trace, with record and transaction ids', async () => {
    const key = randomUUID();
    const first = await send(url, '/pay', { key, body: { amount: 5 } });
    expect(first.status).toBe(201);
    const [record] = await db.records('idempotency_key = $1', [key]);
    const spans = otel.spans.getFinishedSpans();
    const byName = (name: string) => spans.filter((s) => s.name === name);
    const [request] = byName('POST /pay');
    const [claim] = byName('idempotency.claim');
    const [complete] = byName('idempotency.complete');
    for (const child of [claim, complete]) {
      expect(child.spanContext().traceId).toBe(request.spanContext().traceId);
      expect(child.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    }
    expect(claim.attributes).toMatchObject({
      'idempotency.endpoint': 'POST /pay',
      'idempotency.outcome': 'claimed',
      'idempotency.record_id': String(record.id),
    });
    expect(complete.attributes).toMatchObject({
      'idempotency.record_id': String(record.id),
      'idempotency.transaction_id': first.json().id,
    });
    expect(record.transaction_id).toBe(first.json().id);
  });
});
