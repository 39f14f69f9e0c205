/**
 * @fastify/multipart, the parser the NestJS docs name for uploads on Fastify, puts methods
 * (`req.file()`, `req.files()`) on every request of the app: they are not multer's uploads. Before,
 * every keyed request to every route of such an app was refused with 500; with that fixed, its
 * `attachFieldsToBody: true` body, whose parts point back at the body, was walked until the process
 * ran out of memory.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import multipart from '@fastify/multipart';
import { Body, Controller, type INestApplication, Module, Post, Req } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { createHash, randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';

const exec = new Executions();
type KeyValues = Record<string, string | Buffer>;

@Controller()
class AppController {
  @Post('payments')
  @Idempotent()
  charge(@Body() body: { amount: number }) {
    return { amount: body.amount, run: exec.hit('charge') };
  }

  @Post('documents')
  @Idempotent()
  upload(@Req() req: { body: KeyValues }) {
    return { bytes: (req.body.doc as Buffer).length, run: exec.hit('upload') };
  }
}

const form = (content: string) =>
  `--b13\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n` +
  `--b13\r\nContent-Disposition: form-data; name="doc"; filename="a.txt"\r\n` +
  `Content-Type: text/plain\r\n\r\n${content}\r\n--b13--\r\n`;

/** The fingerprint docs/limits-and-choices.md asks for with another multipart parser: the files' hashes. */
async function fileHashes(req: { isMultipart?: () => boolean; body?: unknown }) {
  if (!req.isMultipart?.()) return req.body;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.body as KeyValues)) {
    out[k] = Buffer.isBuffer(v) ? createHash('sha256').update(v).digest('hex') : v;
  }
  return out;
}

describe.each([
  ['keyValues', 'with the files-hash fingerprint'],
  [true, 'with the default fingerprint'],
] as const)('a Fastify app with @fastify/multipart (attachFieldsToBody: %s)', (attach, _how) => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    db = await createMigratedDatabase(`e12mp_${attach === true ? 'parts' : 'kv'}`);
    @Module({
      imports: [
        IdempotencyModule.forRoot({
          dataSource: db.dataSource,
          cleanup: { enabled: false },
          ...(attach === 'keyValues' ? { fingerprint: fileHashes } : {}),
        }),
      ],
      controllers: [AppController],
    })
    class MpModule {}
    app = await NestFactory.create(MpModule, new FastifyAdapter() as never, { logger: false });
    await app.getHttpAdapter().getInstance().register(multipart, { attachFieldsToBody: attach });
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  const send = (path: string, key: string, body: string, type: string) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': type, 'idempotency-key': key },
      body,
    }).then(async (r) => ({ status: r.status, body: await r.text() }));

  it('a JSON payment with a key runs once and is replayed', async () => {
    const key = randomUUID();
    const before = exec.count('charge');
    const json = JSON.stringify({ amount: 5 });
    const first = await send('/payments', key, json, 'application/json');
    expect(first.status).toBe(201);
    expect(await send('/payments', key, json, 'application/json')).toEqual(first);
    expect(exec.count('charge') - before).toBe(1);
  });

  if (attach === 'keyValues') {
    it('an upload runs once per key; another file with the key is refused', async () => {
      const key = randomUUID();
      const before = exec.count('upload');
      const type = 'multipart/form-data; boundary=b13';
      const first = await send('/documents', key, form('first document'), type);
      expect(first.status).toBe(201);
      expect(await send('/documents', key, form('first document'), type)).toEqual(first);
      expect((await send('/documents', key, form('another document'), type)).status).toBe(409);
      expect(exec.count('upload') - before).toBe(1);
    });
  } else {
    it('an upload whose body points back at itself is refused at once, nothing run or stored', async () => {
      const key = randomUUID();
      const before = exec.count('upload');
      const type = 'multipart/form-data; boundary=b13';
      const res = await send('/documents', key, form('first document'), type);
      expect(res.status).toBe(500);
      expect(JSON.parse(res.body)).toMatchObject({ code: 'idempotency_misconfigured' });
      expect(exec.count('upload')).toBe(before);
      expect(await db.records('idempotency_key = $1', [key])).toHaveLength(0);
    });
  }
});
