/**
 * `@Idempotent()` on a class and on its method (or a class-level one over methods with their own
 * interceptors): the class's attachment steps aside for the method's, so one call is handled once
 * whatever an app interceptor between or around them does (`retry()`, a hedge, a cache that
 * answers without calling on). Found by a review attacking an earlier fix that told the two
 * attachments apart with per-call state: a retry between them ran the handler with no claim.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  Body,
  CallHandler,
  Controller,
  ExecutionContext,
  Injectable,
  Module,
  NestInterceptor,
  Post,
  UploadedFile,
  UseInterceptors,
} from '@nestjs/common';
import { FileInterceptor } from '@nestjs/platform-express';
import { MessagePattern, Payload, Transport } from '@nestjs/microservices';
import { randomUUID } from 'node:crypto';
import { retry, timer } from 'rxjs';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { multipart } from '../fixtures/uploads.fixture.js';
import { freePort } from '../fixtures/free-port.js';

const runs = new Map<string, number>();
const bump = (ref: string) => {
  const n = (runs.get(ref) ?? 0) + 1;
  runs.set(ref, n);
  return n;
};

@Injectable()
class RetryOnce implements NestInterceptor {
  intercept(_ctx: ExecutionContext, next: CallHandler) {
    return next.handle().pipe(retry({ count: 1, delay: () => timer(100) }));
  }
}

@Idempotent()
@Controller('hybrid')
class HybridController {
  @Post('upload')
  @UseInterceptors(FileInterceptor('file'))
  upload(@UploadedFile() file: any, @Body() body: { ref: string }) {
    return { n: bump(body.ref), size: file?.size };
  }

  @Post('retry')
  @UseInterceptors(RetryOnce)
  retried(@Body() body: { ref: string }) {
    const n = bump(body.ref);
    if (n === 1) throw new Error('flaky before charging');
    return { n };
  }

  @MessagePattern('hybrid.create')
  create(@Payload() data: { ref: string }) {
    return { n: bump(data.ref) };
  }
}

describe('hybrid controller with class-level @Idempotent()', () => {
  let db: MigratedDatabase;
  let app: ListeningApp;
  beforeAll(async () => {
    db = await createMigratedDatabase('doubled_hybrid');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [HybridController],
    })
    class AppModule {}
    const port = await freePort();
    app = await listenApp(AppModule, 'express', async (a) => {
      a.connectMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
      await a.startAllMicroservices();
    });
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('FileInterceptor route: same upload replays, other file is a mismatch', async () => {
    const ref = randomUUID();
    const key = randomUUID();
    const up = (content: string) => {
      const { body, contentType } = multipart([
        { name: 'ref', value: ref },
        { name: 'file', value: content, filename: 'a.pdf', type: 'application/pdf' },
      ]);
      return send(app.url, '/hybrid/upload', { key, body, contentType });
    };
    const a = await up('AAAA');
    const b = await up('AAAA');
    const c = await up('BBBB');
    expect({
      a: a.status,
      aj: a.json(),
      b: b.status,
      rep: b.headers['idempotent-replayed'],
      c: c.status,
      runs: runs.get(ref),
    }).toEqual({
      a: 201,
      aj: { n: 1, size: 4 },
      b: 201,
      rep: 'true',
      c: 409,
      runs: 1,
    });
  });

  it('method-level retry() on an HTTP route of the hybrid class: retried run claimed; client retry replays', async () => {
    const ref = randomUUID();
    const key = randomUUID();
    const a = await send(app.url, '/hybrid/retry', { key, body: { ref } });
    const b = await send(app.url, '/hybrid/retry', { key, body: { ref } });
    expect({
      a: [a.status, a.text],
      b: [b.status, b.text, b.headers['idempotent-replayed']],
      runs: runs.get(ref),
    }).toEqual({
      a: [201, '{"n":2}'],
      b: [201, '{"n":2}', 'true'],
      runs: 2,
    });
  });
});
