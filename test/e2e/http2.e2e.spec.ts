/**
 * Fastify with `http2: true`, driven by Node's http2 client. A body there is DATA frames and needs
 * no content-length: before, an upload nothing parsed was left out of the fingerprint (another
 * file with the key got the first one's receipt); then a bodiless POST, whose client ends the
 * stream with an empty DATA frame, was taken for an unreadable body (415).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import multipart from '@fastify/multipart';
import {
  Body,
  type CanActivate,
  Controller,
  type ExecutionContext,
  type INestApplication,
  Module,
  Param,
  Post,
  Put,
  Req,
  UseGuards,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { createHash, randomUUID } from 'node:crypto';
import { connect } from 'node:http2';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { Executions } from '../fixtures/payments.fixture.js';

const exec = new Executions();

/** An async guard (a token lookup): the client's closing empty DATA frame arrives meanwhile. */
class SlowAuthGuard implements CanActivate {
  async canActivate() {
    await new Promise((resolve) => setTimeout(resolve, 20));
    return true;
  }
}

type RawRequest = AsyncIterable<Buffer> & { stream: AsyncIterable<Buffer> };

/**
 * A signature check on the raw body, as webhooks and signed instructions do: it reads the request
 * (`req.raw`), or with `x-read: stream` the HTTP/2 stream under it (`req.raw.stream`).
 */
class RawBodyGuard implements CanActivate {
  async canActivate(ctx: ExecutionContext) {
    const req = ctx.switchToHttp().getRequest<{
      raw: RawRequest;
      headers: Record<string, string>;
      rawBody?: Buffer;
    }>();
    const chunks: Buffer[] = [];
    const source = req.headers['x-read'] === 'stream' ? req.raw.stream : req.raw;
    for await (const chunk of source) chunks.push(chunk);
    req.rawBody = Buffer.concat(chunks);
    return true;
  }
}

@Controller()
class H2Controller {
  @Post('transfers')
  @UseGuards(RawBodyGuard)
  @Idempotent()
  transfer(@Req() req: { rawBody: Buffer }) {
    return { instruction: req.rawBody.toString(), run: exec.hit('transfer') };
  }

  @Post('payments/:id/refund')
  @UseGuards(SlowAuthGuard)
  @Idempotent()
  refund(@Param('id') id: string) {
    return { id, refunded: true, run: exec.hit('refund') };
  }

  @Post('documents')
  @Idempotent()
  async upload(@Req() req: { file(): Promise<{ toBuffer(): Promise<Buffer> } | undefined> }) {
    const bytes = await (await req.file())!.toBuffer();
    return { sha256: createHash('sha256').update(bytes).digest('hex'), run: exec.hit('upload') };
  }

  @Put('blobs/:id')
  @Idempotent()
  async put(@Req() req: { raw: AsyncIterable<Buffer> }) {
    const chunks: Buffer[] = [];
    for await (const c of req.raw) chunks.push(c);
    return { bytes: Buffer.concat(chunks).length, run: exec.hit('blob') };
  }

  @Post('payments/:id/capture')
  @Idempotent()
  capture(@Param('id') id: string) {
    return { id, captured: true, run: exec.hit('capture') };
  }

  @Post('payouts')
  @Idempotent()
  payout(@Body() body: { amount: number }) {
    return { amount: body.amount, run: exec.hit('payout') };
  }
}

const form = (content: string) =>
  `--b15\r\nContent-Disposition: form-data; name="doc"; filename="a.txt"\r\n` +
  `Content-Type: text/plain\r\n\r\n${content}\r\n--b15--\r\n`;

describe('keyed requests over HTTP/2 (Fastify http2: true)', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let origin: string;

  beforeAll(async () => {
    db = await createMigratedDatabase('e12h2');
    @Module({
      imports: [
        IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled: false } }),
      ],
      controllers: [H2Controller],
    })
    class H2Module {}
    app = await NestFactory.create(H2Module, new FastifyAdapter({ http2: true }) as never, {
      logger: false,
    });
    await app.getHttpAdapter().getInstance().register(multipart);
    await app.listen(0, '127.0.0.1');
    origin = `http://127.0.0.1:${app.getHttpServer().address().port}`;
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  /** No content-length and no endStream: Node's default for a POST, as got / http2-wrapper send it. */
  const send = (
    path: string,
    key: string,
    type?: string,
    body?: string,
    method = 'POST',
    extra: Record<string, string> = {},
  ) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const session = connect(origin);
      session.on('error', reject);
      const headers = { ':method': method, ':path': path, 'idempotency-key': key, ...extra };
      const stream = session.request(type ? { ...headers, 'content-type': type } : headers);
      let status = 0;
      const chunks: Buffer[] = [];
      stream.on('response', (h) => (status = Number(h[':status'])));
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        session.close();
        resolve({ status, body: Buffer.concat(chunks).toString() });
      });
      stream.on('error', reject);
      stream.end(body);
    });

  it('refuses an upload nothing parsed (415), as over HTTP/1.1, never replaying another file', async () => {
    const key = randomUUID();
    const type = 'multipart/form-data; boundary=b15';
    const first = await send('/documents', key, type, form('pay 10 EUR to alice'));
    const second = await send('/documents', key, type, form('pay 9000 EUR to mallory'));
    expect([first.status, second.status]).toEqual([415, 415]);
    expect(exec.count('upload')).toBe(0);
  });

  it('refuses an untyped body nothing parsed (415), never replaying another one', async () => {
    const key = randomUUID();
    const first = await send('/blobs/b1', key, undefined, 'pay 10 EUR to alice', 'PUT');
    const second = await send('/blobs/b1', key, undefined, 'pay 9000 EUR to mallory', 'PUT');
    expect([first.status, second.status]).toEqual([415, 415]);
    expect(exec.count('blob')).toBe(0);
  });

  it('runs a bodiless POST once and replays it', async () => {
    const key = randomUUID();
    const first = await send('/payments/pi_1/capture', key);
    const second = await send('/payments/pi_1/capture', key);
    expect(first.status).toBe(201);
    expect(second).toEqual(first);
    expect(exec.count('capture')).toBe(1);
  });

  it('runs a bodiless POST once behind an async guard, whose stream ended before the check', async () => {
    const key = randomUUID();
    const first = await send('/payments/pi_1/refund', key);
    const second = await send('/payments/pi_1/refund', key);
    expect(first.status).toBe(201);
    expect(second).toEqual(first);
    expect(exec.count('refund')).toBe(1);
  });

  it.each(['request', 'stream'])(
    'refuses a body a guard already read from the %s (415), never replaying another one',
    async (read) => {
      const key = randomUUID();
      const x = { 'x-read': read };
      const first = await send('/transfers', key, undefined, 'pay 10 EUR to alice', 'POST', x);
      const second = await send('/transfers', key, undefined, 'pay 9000 EUR', 'POST', x);
      expect([first.status, second.status]).toEqual([415, 415]);
      expect(JSON.parse(second.body)).toMatchObject({ code: 'idempotency_body_unreadable' });
      expect(exec.count('transfer')).toBe(0);
    },
  );

  it.each(['request', 'stream'])(
    'runs a bodiless POST once whose empty %s a guard already read',
    async (read) => {
      const key = randomUUID();
      const before = exec.count('transfer');
      const first = await send('/transfers', key, undefined, undefined, 'POST', { 'x-read': read });
      const second = await send('/transfers', key, undefined, undefined, 'POST', {
        'x-read': read,
      });
      expect(first.status).toBe(201);
      expect(second).toEqual(first);
      expect(exec.count('transfer')).toBe(before + 1);
    },
  );

  it('fingerprints a JSON body without content-length: replayed, another body refused', async () => {
    const key = randomUUID();
    const json = 'application/json';
    const first = await send('/payouts', key, json, JSON.stringify({ amount: 10 }));
    const retry = await send('/payouts', key, json, JSON.stringify({ amount: 10 }));
    const other = await send('/payouts', key, json, JSON.stringify({ amount: 9000 }));
    expect(first.status).toBe(201);
    expect(retry).toEqual(first);
    expect(other.status).toBe(409);
    expect(exec.count('payout')).toBe(1);
  });
});
