import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Body, Controller, Module, Post, UploadedFile, UseInterceptors } from '@nestjs/common';
import { FileInterceptor } from '@nestjs/platform-express';
import { randomUUID } from 'node:crypto';
import { IdempotencyModule, Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { multipart } from '../fixtures/uploads.fixture.js';

/**
 * attack-84 on 70a12e3. The class-level @Idempotent() sits on an abstract base controller (every
 * documents controller of the app is idempotent), the upload route is declared in the subclass.
 * The decorator only put MethodIdempotencyInterceptor on the routes it saw when the BASE class
 * was decorated, so the subclass's route kept only the inherited class attachment, which Nest
 * ran before the method's FileInterceptor: the fingerprint was taken before multer had read the
 * multipart body, and the library answered 415 (body_unreadable) to every keyed upload. Until 70a12e3 start-up placed the class's interceptor innermost on every
 * route of a controller whose class (or base class) carried it, and this passed.
 */
function controllers() {
  const runs = { count: 0 };
  @Idempotent()
  abstract class IdempotentDocuments {}

  @Controller('documents')
  class DocumentsController extends IdempotentDocuments {
    @Post()
    @UseInterceptors(FileInterceptor('file'))
    upload(@UploadedFile() file: any, @Body() body: unknown) {
      runs.count++;
      return {
        file: file && { name: file.originalname, size: file.size, text: String(file.buffer) },
        body,
      };
    }
  }
  return { runs, DocumentsController };
}

describe('class-level @Idempotent() on a base controller, upload route in the subclass (express)', () => {
  let db: MigratedDatabase;
  let app: ListeningApp;
  const c = controllers();
  beforeAll(async () => {
    db = await createMigratedDatabase('attack84_base_upload');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [c.DocumentsController],
    })
    class AppModule {}
    app = await listenApp(AppModule, 'express');
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const upload = (key: string, content: string) => {
    const { body, contentType } = multipart([
      { name: 'note', value: 'invoice' },
      { name: 'file', value: content, filename: 'scan.pdf', type: 'application/pdf' },
    ]);
    return send(app.url, '/documents', { key, body, contentType });
  };

  it('the same key with another file is a mismatch, not a replay of the first file', async () => {
    const key = randomUUID();
    const first = await upload(key, 'AAAA-original');
    expect({ status: first.status, body: first.body.toString() }).toMatchObject({ status: 201 });
    expect(first.json()).toMatchObject({ file: { text: 'AAAA-original' } });

    const same = await upload(key, 'AAAA-original');
    expect(same.headers['idempotent-replayed']).toBe('true');

    const other = await upload(key, 'BBBB-tampered');
    expect(other.status).toBe(409);
    expect(other.json()).toMatchObject({ code: 'idempotency_key_reused_with_different_params' });
    expect(c.runs.count).toBe(1);
  });
});
