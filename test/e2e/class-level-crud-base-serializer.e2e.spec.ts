import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  ClassSerializerInterceptor,
  type CallHandler,
  Controller,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
  type INestApplication,
  Module,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';

/**
 * attack-85 on 69ced76. A generic CRUD base controller carries `@Idempotent()` and the usual
 * `ClassSerializerInterceptor` (decorator order: serializer listed first, so Nest records it
 * after the idempotency attachment). A concrete controller extends it and declares one route of
 * its own, with no interceptor of its own. At 7c14544 this app started and the route replayed
 * (start-up put the interceptor innermost on every route of a class-idempotent class). On
 * 69ced76 start-up refused it: the subclass route had no token, and the serializer, harmless
 * inside a claim, sat after the class attachment. Fixed: every route of the class gets one.
 */
const runs = new Map<string, number>();

@UseInterceptors(ClassSerializerInterceptor)
@Idempotent()
abstract class CrudController {
  @Post()
  create(@Body() dto: { ref: string }) {
    runs.set(dto.ref, (runs.get(dto.ref) ?? 0) + 1);
    return { created: dto.ref };
  }
}

@Controller('users')
class UsersController extends CrudController {
  @Post('invite')
  invite(@Body() dto: { ref: string }) {
    runs.set(dto.ref, (runs.get(dto.ref) ?? 0) + 1);
    return { invited: dto.ref };
  }
}

/** The other common form: the base carries only @Idempotent(), the concrete controller logs. */
@Injectable()
class LoggingInterceptor implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler) {
    return next.handle();
  }
}

@Idempotent()
abstract class PlainCrudController {
  @Post()
  create(@Body() dto: { ref: string }) {
    runs.set(dto.ref, (runs.get(dto.ref) ?? 0) + 1);
    return { created: dto.ref };
  }
}

@Controller('orders')
@UseInterceptors(LoggingInterceptor)
class OrdersController extends PlainCrudController {
  @Post('cancel')
  cancel(@Body() dto: { ref: string }) {
    runs.set(dto.ref, (runs.get(dto.ref) ?? 0) + 1);
    return { cancelled: dto.ref };
  }
}

let db: MigratedDatabase;
let app: INestApplication | undefined;
beforeAll(async () => {
  db = await createMigratedDatabase('attack85_crud_serializer');
});
afterEach(async () => {
  await app?.close();
  app = undefined;
});
afterAll(async () => {
  await db?.drop();
});

const startAndRetry = async (controller: new (...args: never[]) => object, path: string) => {
  @Module({
    imports: [
      IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
    ],
    controllers: [controller],
  })
  class AppModule {}
  // abortOnError: false so the start-up error is the test's failure, not a process.exit.
  app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
  await app.listen(0, '127.0.0.1');
  const url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  const ref = randomUUID();
  const key = randomUUID();
  const first = await send(url, path, { key, body: { ref } });
  const retry = await send(url, path, { key, body: { ref } });
  return {
    first: first.status,
    replayed: retry.headers['idempotent-replayed'],
    runs: runs.get(ref),
  };
};

describe('generic CRUD base with @Idempotent(), a concrete controller adding a route', () => {
  it('ClassSerializerInterceptor on the base: starts, the subclass route replays a retry', async () => {
    expect(await startAndRetry(UsersController, '/users/invite')).toEqual({
      first: 201,
      replayed: 'true',
      runs: 1,
    });
  });

  it('an interceptor on the concrete controller: starts, the subclass route replays a retry', async () => {
    expect(await startAndRetry(OrdersController, '/orders/cancel')).toEqual({
      first: 201,
      replayed: 'true',
      runs: 1,
    });
  });
});
