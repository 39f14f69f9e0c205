/**
 * Once the handler returned, its key ends completed (with or without a body), never free again,
 * even when the client gets a 500 made after the handler: a global interceptor that fails while
 * mapping the result (synchronously, or asynchronously, an audit write) or a result the platform
 * cannot serialize (a `BigInt`, as pg and Prisma give for bigint columns). Found by a review
 * acting as a new user: the key was released and a retry charged again.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  CallHandler,
  Controller,
  ExecutionContext,
  Injectable,
  InternalServerErrorException,
  Module,
  NestInterceptor,
  Post,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { map, mergeMap } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import type { Platform } from '../fixtures/payments.fixture.js';

const charges = new Map<string, number>();
const charge = (ref: string) => charges.set(ref, (charges.get(ref) ?? 0) + 1);

/** An app-wide response envelope that refuses results without an id (a realistic sanity check). */
@Injectable()
class EnvelopeInterceptor implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(
      map((data: any) => {
        if (data && data.strict && !data.id) throw new InternalServerErrorException('no id');
        return data;
      }),
      // An audit write after the handler (e.g. to another database) that fails.
      mergeMap(async (data: any) => {
        await new Promise((r) => setTimeout(r, 5));
        if (data && data.audit) throw new Error('audit store down');
        return data;
      }),
    );
  }
}

@Controller('payments')
class PaymentsController {
  @Post('envelope')
  @Idempotent()
  envelope(@Body() body: { ref: string }) {
    charge(body.ref);
    return { strict: true, ref: body.ref }; // charged, but the outer interceptor rejects it
  }

  @Post('audit')
  @Idempotent()
  audited(@Body() body: { ref: string }) {
    charge(body.ref);
    return { id: `pay_${body.ref}`, audit: true }; // charged; the global audit interceptor then fails
  }

  @Post('bigint')
  @Idempotent()
  bigint(@Body() body: { ref: string }) {
    charge(body.ref);
    return { id: `pay_${body.ref}`, amountMinor: 500n }; // charged, then JSON.stringify throws
  }
}

describe.each(['express', 'fastify'] as Platform[])('after-handler 500 (%s)', (platform) => {
  let db: MigratedDatabase;
  let app: ListeningApp;

  beforeAll(async () => {
    db = await createMigratedDatabase(`after500_${platform}`);
    @Module({
      imports: [IdempotencyModule.forRoot({ dataSource: db.dataSource, replayCache: false })],
      controllers: [PaymentsController],
      providers: [{ provide: APP_INTERCEPTOR, useClass: EnvelopeInterceptor }],
    })
    class AppModule {}
    app = await listenApp(AppModule, platform);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it.each(['envelope', 'audit', 'bigint'])(
    '%s: the handler returned normally; a retry with the same key must not run it again',
    async (route) => {
      const ref = randomUUID();
      const key = randomUUID();
      const first = await send(app.url, `/payments/${route}`, { key, body: { ref } });
      expect(first.status).toBe(500);
      expect(charges.get(ref)).toBe(1);
      const retry = await send(app.url, `/payments/${route}`, { key, body: { ref } });
      const rows = await db.records('idempotency_key = $1', [key]);
      expect({ charges: charges.get(ref), rows: rows.length, retryStatus: retry.status }).toEqual({
        charges: 1,
        rows: 1,
        retryStatus: 409,
      });
      // The status the client got; the envelope's error came while the handler's observable was
      // still open, so it is recorded as an early answer, with the status the handler meant.
      expect(retry.json()).toMatchObject({
        code: 'idempotency_response_not_replayable',
        original_status: route === 'envelope' ? 201 : 500,
      });
    },
  );
});
