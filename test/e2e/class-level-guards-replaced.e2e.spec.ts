import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  type CanActivate,
  Body,
  Controller,
  Injectable,
  Module,
  Post,
  SetMetadata,
} from '@nestjs/common';
import { GUARDS_METADATA } from '@nestjs/common/constants.js';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { IdempotencyModule, Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';

/**
 * attack-86 on 85237a1. Two class-level @Idempotent() controllers of one CRUD base, in two
 * feature modules. The second sets its class guards itself (a project decorator that writes
 * GUARDS_METADATA, replacing the list instead of extending it), so MethodIdempotencyInterceptor
 * is not among them and Nest never registers it in that module. IdempotencyInterceptorOrder puts
 * it on the base's shared route function for the first controller; Nest silently drops it on the
 * second's route (not registered there), and the second's ClassIdempotencyInterceptor sees the
 * function carrying an idempotency interceptor and steps aside. The route runs unprotected: a
 * retry with the same key runs the handler again. Before 85237a1 the class attachment covered it.
 */
@Injectable()
class AllowGuard implements CanActivate {
  canActivate() {
    return true;
  }
}
const Guarded = () => SetMetadata(GUARDS_METADATA, [AllowGuard]);

const runs: Record<string, number> = {};
abstract class CrudController {
  @Post()
  create(@Body() dto: { text: string }) {
    const name = this.constructor.name;
    runs[name] = (runs[name] ?? 0) + 1;
    return { id: randomUUID(), ...dto };
  }
}
@Controller('payments')
@Idempotent()
class PaymentsController extends CrudController {}

@Controller('refunds')
@Guarded()
@Idempotent()
class RefundsController extends CrudController {}

@Module({ controllers: [PaymentsController] })
class PaymentsModule {}
@Module({ controllers: [RefundsController], providers: [AllowGuard] })
class RefundsModule {}

describe('a class-level @Idempotent() controller whose class guards are set, not extended', () => {
  let db: MigratedDatabase;
  let pool: pg.Pool;
  let app: { url: string; close: () => Promise<void> } | undefined;
  beforeAll(async () => {
    db = await createMigratedDatabase('attack86_guards_replaced');
    pool = new pg.Pool({ connectionString: db.url, max: 4 });
    @Module({
      imports: [
        IdempotencyModule.forRoot({ pool, cleanup: { enabled: false } }),
        PaymentsModule,
        RefundsModule,
      ],
    })
    class AppModule {}
    const nest = await NestFactory.create(AppModule, new ExpressAdapter(), {
      logger: false,
      abortOnError: false,
    });
    await nest.listen(0, '127.0.0.1');
    app = {
      url: `http://127.0.0.1:${nest.getHttpServer().address().port}`,
      close: () => nest.close(),
    };
  });
  afterAll(async () => {
    await app?.close();
    await pool?.end();
    await db?.drop();
  });

  it.each([
    ['/payments', 'PaymentsController'],
    ['/refunds', 'RefundsController'],
  ])('%s: a retry with the same key runs the handler once', async (path, name) => {
    const key = randomUUID();
    const before = runs[name] ?? 0;
    const first = await send(app!.url, path, {
      headers: [['Idempotency-Key', key]],
      body: { text: 'x' },
    });
    const retry = await send(app!.url, path, {
      headers: [['Idempotency-Key', key]],
      body: { text: 'x' },
    });
    expect(first.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(runs[name]).toBe(before + 1);
  });
});
