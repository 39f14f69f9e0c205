import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  type CallHandler,
  Controller,
  type ExecutionContext,
  Injectable,
  InternalServerErrorException,
  Module,
  type NestInterceptor,
  Post,
  UseInterceptors,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { mergeMap, of, retry, throwError } from 'rxjs';
import { IdempotencyModule, Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';

/**
 * attack-84 on 70a12e3: `@Idempotent()` on an abstract base controller, the route declared in
 * the subclass with interceptors of its own (a retry-once around an audit that fails once after
 * the handler returned). Only the class's attachment reached such a route, and Nest ran it
 * outside the method's interceptors: the retry called the handler again and one keyed request
 * charged twice. Now every route of a class-level `@Idempotent()` gets the routes' interceptor
 * innermost, whichever class declares it; a plain sibling sharing a route stays plain.
 */
const charges = new Map<string, number>();

@Injectable()
class RetryOnceInterceptor implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(retry({ count: 1 }));
  }
}

@Injectable()
class AuditFailsOnceInterceptor implements NestInterceptor {
  private readonly failed = new Set<string>();
  intercept(ctx: ExecutionContext, next: CallHandler) {
    const ref: string = ctx.switchToHttp().getRequest().body.ref;
    return next.handle().pipe(
      mergeMap((value) => {
        if (this.failed.has(ref)) return of(value);
        this.failed.add(ref);
        return throwError(() => new InternalServerErrorException('audit write timed out'));
      }),
    );
  }
}

const charge = (dto: { ref: string }) => {
  charges.set(dto.ref, (charges.get(dto.ref) ?? 0) + 1);
  return { charged: dto.ref };
};

@Idempotent()
abstract class IdempotentBase {}

@Controller('inherited/charges')
class InheritedCharges extends IdempotentBase {
  @Post()
  @UseInterceptors(RetryOnceInterceptor, AuditFailsOnceInterceptor)
  charge(@Body() dto: { ref: string }) {
    return charge(dto);
  }
}

@Controller('plain/charges')
class PlainInheritedCharges extends IdempotentBase {
  @Post()
  charge(@Body() dto: { ref: string }) {
    return charge(dto);
  }
}

@Controller('direct/charges')
@Idempotent()
class DirectCharges {
  @Post()
  @UseInterceptors(RetryOnceInterceptor, AuditFailsOnceInterceptor)
  charge(@Body() dto: { ref: string }) {
    return charge(dto);
  }
}

/** A plain base declaring the route with its interceptors; one subclass decorated, one not. */
abstract class PlainBase {
  @Post()
  @UseInterceptors(RetryOnceInterceptor, AuditFailsOnceInterceptor)
  charge(@Body() dto: { ref: string }) {
    return charge(dto);
  }
}

@Controller('decorated-subclass/charges')
@Idempotent()
class DecoratedSubclass extends PlainBase {}

@Controller('plain-sibling/charges')
class PlainSibling extends PlainBase {}

let db: MigratedDatabase;
beforeAll(async () => {
  db = await createMigratedDatabase('class_level_base_route');
});
afterAll(async () => {
  await db?.drop();
});

const appModule = (controllers: (new () => object)[]) => {
  @Module({
    imports: [
      IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
    ],
    controllers,
  })
  class AppModule {}
  return AppModule;
};

describe.each(['express', 'fastify'] as const)('routes that start (%s)', (platform) => {
  let app: ListeningApp;
  beforeAll(async () => {
    app = await listenApp(
      appModule([
        DirectCharges,
        InheritedCharges,
        PlainInheritedCharges,
        DecoratedSubclass,
        PlainSibling,
      ]),
      platform,
    );
  });
  afterAll(async () => {
    await app?.close();
  });

  it('the decorated class’s own route: the retry inside meets the claim, the handler runs once', async () => {
    const ref = randomUUID();
    await send(app.url, '/direct/charges', { key: randomUUID(), body: { ref } });
    expect(charges.get(ref)).toBe(1);
  });

  it('a subclass route without interceptors of its own: replayed from the base class’s attachment', async () => {
    const ref = randomUUID();
    const key = randomUUID();
    const first = await send(app.url, '/plain/charges', { key, body: { ref } });
    const retry = await send(app.url, '/plain/charges', { key, body: { ref } });
    expect({ first: first.status, replayed: retry.headers['idempotent-replayed'] }).toEqual({
      first: 201,
      replayed: 'true',
    });
    expect(charges.get(ref)).toBe(1);
  });

  it('a route the subclass of a decorated base declares, with a retry of its own: runs once', async () => {
    const ref = randomUUID();
    await send(app.url, '/inherited/charges', { key: randomUUID(), body: { ref } });
    expect(charges.get(ref)).toBe(1);
  });

  it('a decorated subclass’s inherited route: innermost, the handler runs once', async () => {
    const ref = randomUUID();
    await send(app.url, '/decorated-subclass/charges', { key: randomUUID(), body: { ref } });
    expect(charges.get(ref)).toBe(1);
  });

  it('its plain sibling shares the route function and stays without idempotency', async () => {
    const ref = randomUUID();
    const key = randomUUID();
    await send(app.url, '/plain-sibling/charges', { key, body: { ref } });
    const again = await send(app.url, '/plain-sibling/charges', { key, body: { ref } });
    expect({ replayed: again.headers['idempotent-replayed'], runs: charges.get(ref) }).toEqual({
      replayed: undefined,
      runs: 3, // the first call retried once by the route's own interceptor, the second run again
    });
  });
});
