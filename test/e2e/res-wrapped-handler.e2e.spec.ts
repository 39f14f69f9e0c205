/**
 * A `@Res()` handler whose method another decorator wraps (a tracing span, MikroORM's
 * `@CreateRequestContext()`, a metrics decorator: `descriptor.value = function (...) {}`). Nest
 * routes it by its property name and keys `@Res()` by that name; until 2026-12-05 the library
 * looked `@Res()` up under the wrapper's name (`''`), took the handler's own answer for an early
 * one and did not store it: the retry got 409 not replayable, and a handler that sent its 201
 * and then threw had its key freed, so the retry charged again (found by helper-70).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post, Res } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';

const charges = new Map<string, number>();
const charge = (ref: string) => charges.set(ref, (charges.get(ref) ?? 0) + 1);
/** res.status(201).json(body) on Express, reply.code(201).send(body) on Fastify. */
const sendReceipt = (res: any) => {
  const body = { id: `pay_${randomUUID()}`, status: 'succeeded' };
  if (typeof res.code === 'function') res.code(201).send(body);
  else res.status(201).json(body);
};

/** A typical tracing/logging method decorator: wraps the method in a function expression. */
function Traced(): MethodDecorator {
  return (_target, _key, descriptor: PropertyDescriptor) => {
    const original = descriptor.value as (...args: unknown[]) => unknown;
    descriptor.value = function (this: unknown, ...args: unknown[]) {
      return original.apply(this, args);
    };
    return descriptor;
  };
}

@Controller('cards')
class CardsController {
  @Post('plain')
  @Idempotent()
  plain(@Body() body: { ref: string }, @Res() res: any) {
    charge(body.ref);
    sendReceipt(res);
  }

  @Post('traced')
  @Idempotent()
  @Traced()
  traced(@Body() body: { ref: string }, @Res() res: any) {
    charge(body.ref);
    sendReceipt(res);
  }

  @Post('plain-then-throws')
  @Idempotent()
  plainThenThrows(@Body() body: { ref: string }, @Res() res: any) {
    charge(body.ref);
    sendReceipt(res);
    throw new Error('writing the audit log failed after the receipt was sent');
  }

  @Post('traced-then-throws')
  @Idempotent()
  @Traced()
  tracedThenThrows(@Body() body: { ref: string }, @Res() res: any) {
    charge(body.ref);
    sendReceipt(res);
    throw new Error('writing the audit log failed after the receipt was sent');
  }
}

for (const platform of ['express', 'fastify'] as const) {
  describe(`@Res() handler wrapped by another method decorator (${platform})`, () => {
    let db: MigratedDatabase;
    let url: string;
    let close: () => Promise<void>;

    beforeAll(async () => {
      db = await createMigratedDatabase('res_wrapped');
      @Module({
        imports: [
          IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
        ],
        controllers: [CardsController],
      })
      class AppModule {}
      ({ url, close } = await listenApp(AppModule, platform));
    });
    afterAll(async () => {
      await close?.();
      await db?.drop();
    });

    /** A charge and its retry with the same key (the client lost the first answer). */
    const chargeAndRetry = async (path: string) => {
      const key = randomUUID();
      const ref = randomUUID();
      const first = await send(url, path, { key, body: { ref } });
      await new Promise((r) => setTimeout(r, 300));
      const again = await send(url, path, { key, body: { ref } });
      return { first, again, charged: charges.get(ref) };
    };

    it('control: an unwrapped @Res() handler is stored and replayed', async () => {
      const { first, again, charged } = await chargeAndRetry('/cards/plain');
      expect(first.status).toBe(201);
      expect({ status: again.status, body: again.text }).toEqual({ status: 201, body: first.text });
      expect(charged).toBe(1);
    });

    it('a wrapped @Res() handler is stored and replayed too', async () => {
      const { first, again, charged } = await chargeAndRetry('/cards/traced');
      expect(first.status).toBe(201);
      expect(charged).toBe(1);
      expect({ status: again.status, body: again.text }).toEqual({ status: 201, body: first.text });
    });

    it('control: an unwrapped @Res() handler that sent 201 then threw: stored, charged once', async () => {
      const { first, again, charged } = await chargeAndRetry('/cards/plain-then-throws');
      expect(first.status).toBe(201);
      expect({ status: again.status, body: again.text }).toEqual({ status: 201, body: first.text });
      expect(charged).toBe(1);
    });

    it('a wrapped @Res() handler that sent 201 then threw: stored, charged once', async () => {
      const { first, again, charged } = await chargeAndRetry('/cards/traced-then-throws');
      expect(first.status).toBe(201);
      expect(charged).toBe(1);
      expect({ status: again.status, body: again.text }).toEqual({ status: 201, body: first.text });
    });
  });
}
