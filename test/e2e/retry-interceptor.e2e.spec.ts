/**
 * An app-wide "retry transient failures" interceptor (rxjs `retry`, a common NestJS pattern; Nest
 * runs global interceptors outside the idempotency interceptor). Subscribing `next.handle()` again
 * makes Nest call the idempotency interceptor again for the same request: it must handle that call
 * again (claim, refuse, replay), never pass it to the handler without a claim, as it did when a
 * review acting as a new user found it: the fail-closed 503, the in-progress 409 and the mismatch
 * 409 were retried into unprotected runs. A handler that threw is run again by the retry under a
 * claim of its own; one that returned is never run again.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  CallHandler,
  Controller,
  ExecutionContext,
  HttpException,
  Injectable,
  Module,
  NestInterceptor,
  Post,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { mergeMap, retry, throwError, timer } from 'rxjs';
import {
  Idempotent,
  IdempotencyCtx,
  type IdempotencyContext,
  IdempotencyModule,
} from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import type { Platform } from '../fixtures/payments.fixture.js';

const charges = new Map<string, number>();
const charge = (ref: string) => charges.set(ref, (charges.get(ref) ?? 0) + 1);

/** Retries a failed call once after 300 ms, the way apps retry a flaky downstream dependency. */
@Injectable()
class RetryOnceInterceptor implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(
      retry({
        count: 1,
        delay: (err) =>
          err instanceof HttpException && err.getStatus() < 409
            ? throwError(() => err)
            : timer(300),
      }),
    );
  }
}

/** Fails once per `failAuditOnce` ref after the handler returned (an audit write that times out). */
@Injectable()
class AuditInterceptor implements NestInterceptor {
  private readonly failed = new Set<string>();
  intercept(_ctx: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(
      mergeMap(async (data: { ref?: string; failAuditOnce?: boolean }) => {
        await new Promise((r) => setTimeout(r, 5));
        if (data?.failAuditOnce && data.ref && !this.failed.has(data.ref)) {
          this.failed.add(data.ref);
          throw new Error('audit store timed out');
        }
        return data;
      }),
    );
  }
}

const invocations = new Map<string, number>();

@Controller('payments')
class PaymentsController {
  /** The processor times out on the first attempt, before charging; the retry succeeds. */
  @Post('flaky')
  @Idempotent({ transactional: true })
  async flaky(@Body() body: { ref: string }, @IdempotencyCtx() idem: IdempotencyContext) {
    const n = (invocations.get(body.ref) ?? 0) + 1;
    invocations.set(body.ref, n);
    await idem.manager!.query('INSERT INTO retry_ledger (ref, attempt) VALUES ($1, $2)', [
      body.ref,
      n,
    ]);
    if (n === 1) throw new Error('processor timed out');
    charge(body.ref);
    return { id: `pay_${body.ref}`, attempt: n };
  }

  /** Charges, then the audit interceptor fails once: the retry must not charge again. */
  @Post('audited')
  @Idempotent()
  audited(@Body() body: { ref: string }) {
    charge(body.ref);
    return { id: `pay_${body.ref}`, ref: body.ref, failAuditOnce: true };
  }

  @Post()
  @Idempotent()
  async create(@Body() body: { ref: string; amount: number; slowMs?: number }) {
    charge(body.ref);
    await new Promise((r) => setTimeout(r, body.slowMs ?? 0));
    return { id: `pay_${randomUUID()}`, amount: body.amount };
  }
}

describe.each(['express', 'fastify'] as Platform[])('global retry interceptor (%s)', (platform) => {
  let db: MigratedDatabase;
  let app: ListeningApp;
  let down: ListeningApp;
  let deadPool: pg.Pool;

  beforeAll(async () => {
    db = await createMigratedDatabase(`retry_${platform}`);
    await db.dataSource.query(
      'CREATE TABLE retry_ledger (ref text NOT NULL, attempt int NOT NULL)',
    );
    @Module({
      imports: [IdempotencyModule.forRoot({ dataSource: db.dataSource, replayCache: false })],
      controllers: [PaymentsController],
      providers: [
        { provide: APP_INTERCEPTOR, useClass: RetryOnceInterceptor },
        { provide: APP_INTERCEPTOR, useClass: AuditInterceptor },
      ],
    })
    class AppModule {}
    app = await listenApp(AppModule, platform);

    // The same app whose PostgreSQL is unreachable (nothing listens on port 9).
    deadPool = new pg.Pool({
      connectionString: 'postgres://postgres@127.0.0.1:9/test',
      connectionTimeoutMillis: 500,
    });
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          pool: deadPool,
          cleanup: { enabled: false },
          statementTimeoutMs: 1000,
        }),
      ],
      controllers: [PaymentsController],
      providers: [{ provide: APP_INTERCEPTOR, useClass: RetryOnceInterceptor }],
    })
    class DownModule {}
    down = await listenApp(DownModule, platform);
  });
  afterAll(async () => {
    await app?.close();
    await down?.close();
    await deadPool?.end().catch(() => undefined);
    await db?.drop();
  });

  it('PostgreSQL unreachable: fails closed (503), the handler never runs', async () => {
    const ref = randomUUID();
    const res = await send(down.url, '/payments', { key: randomUUID(), body: { ref, amount: 5 } });
    expect({ status: res.status, charges: charges.get(ref) ?? 0 }).toEqual({
      status: 503,
      charges: 0,
    });
  });

  it('a duplicate sent while the first still runs never runs the handler a second time', async () => {
    const ref = randomUUID();
    const key = randomUUID();
    const first = send(app.url, '/payments', { key, body: { ref, amount: 5, slowMs: 1500 } });
    await new Promise((r) => setTimeout(r, 200));
    const dup = await send(app.url, '/payments', { key, body: { ref, amount: 5, slowMs: 1500 } });
    const a = await first;
    expect({ first: a.status, charges: charges.get(ref), dup: dup.status }).toEqual({
      first: 201,
      charges: 1,
      dup: 409,
    });
  });

  it('a key reused with another body never runs the handler for it', async () => {
    const key = randomUUID();
    const ref1 = randomUUID();
    const ref2 = randomUUID();
    const a = await send(app.url, '/payments', { key, body: { ref: ref1, amount: 5 } });
    const b = await send(app.url, '/payments', { key, body: { ref: ref2, amount: 9999 } });
    expect({ a: a.status, b: b.status, charges2: charges.get(ref2) ?? 0 }).toEqual({
      a: 201,
      b: 409,
      charges2: 0,
    });
  });

  it('a handler that threw is run again by the retry: its first attempt rolled back, the second stored', async () => {
    const ref = randomUUID();
    const key = randomUUID();
    const first = await send(app.url, '/payments/flaky', { key, body: { ref } });
    expect(first.status).toBe(201);
    expect(first.json()).toEqual({ id: `pay_${ref}`, attempt: 2 });
    const again = await send(app.url, '/payments/flaky', { key, body: { ref } });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect({ invocations: invocations.get(ref), charges: charges.get(ref) }).toEqual({
      invocations: 2,
      charges: 1,
    });
    const rows = await db.dataSource.query('SELECT attempt FROM retry_ledger WHERE ref = $1', [
      ref,
    ]);
    expect(rows).toEqual([{ attempt: 2 }]);
  });

  it('a handler that returned is never run again by the retry: the call learns it ran', async () => {
    const ref = randomUUID();
    const key = randomUUID();
    const first = await send(app.url, '/payments/audited', { key, body: { ref } });
    expect(first.status).toBe(409);
    expect(first.json()).toMatchObject({
      code: 'idempotency_response_not_replayable',
      original_status: 201,
    });
    const later = await send(app.url, '/payments/audited', { key, body: { ref } });
    expect(later.status).toBe(409);
    expect(charges.get(ref)).toBe(1);
  });
});
