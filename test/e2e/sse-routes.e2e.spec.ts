/**
 * `@Idempotent()` on an `@Sse()` route cannot keep its promises: the stream's headers are out
 * before a refusal could be answered (a concurrent retry got `200 text/event-stream` with
 * `event: error`, its 409, code and Retry-After lost). Start-up refuses it, naming the route.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, Module, Sse, type MessageEvent } from '@nestjs/common';
import { interval, map, take, type Observable } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import type { Platform } from '../fixtures/payments.fixture.js';

const ticks = (): Observable<MessageEvent> =>
  interval(10).pipe(
    take(2),
    map((i) => ({ data: { tick: i } })),
  );

@Controller('payments')
class SseOnMethodController {
  @Sse('progress')
  @Idempotent()
  progress() {
    return ticks();
  }
}

@Controller('payouts')
@Idempotent()
class IdempotentController {
  @Get(':id')
  find() {
    return { ok: true };
  }

  @Sse('feed')
  feed() {
    return ticks();
  }
}

@Controller('quotes')
class PlainSseController {
  @Sse('live')
  live() {
    return ticks();
  }

  @Get(':id')
  @Idempotent()
  find() {
    return { quote: 1 };
  }
}

describe.each(['express', 'fastify'] as Platform[])('@Sse() routes (%s)', (platform) => {
  let db: MigratedDatabase;
  beforeAll(async () => {
    db = await createMigratedDatabase(`sse_${platform}`);
  });
  afterAll(async () => db?.drop());

  const appWith = (controller: new () => object) => {
    @Module({
      imports: [IdempotencyModule.forRoot({ dataSource: db.dataSource })],
      controllers: [controller],
    })
    class AppModule {}
    return listenApp(AppModule, platform);
  };

  it.each([
    [
      'on the method',
      SseOnMethodController,
      'SseOnMethodController.progress (GET /payments/progress)',
    ],
    ['on its controller', IdempotentController, 'IdempotentController.feed (GET /payouts/feed)'],
  ])(
    'refuses to start with @Idempotent() %s of an @Sse() route, naming it',
    async (_, cls, route) => {
      let error: Error | undefined;
      await appWith(cls).then(
        (app) => app.close(),
        (err: Error) => (error = err),
      );
      expect(error?.message).toContain(`nestjs-pg-idempotency: ${route} is an @Sse() route`);
    },
  );

  it('starts with @Sse() routes that are not idempotent, next to idempotent ones', async () => {
    const app = await appWith(PlainSseController);
    try {
      const live = await send(app.url, '/quotes/live', { method: 'GET', key: 'k-1' });
      expect(live.headers['content-type']).toContain('text/event-stream');
      expect(live.text).toContain('"tick":1');
      expect(await db.records()).toEqual([]);
    } finally {
      await app.close();
    }
  });
});
