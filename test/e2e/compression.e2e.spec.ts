/**
 * Response compression as the NestJS docs set it up: `@fastify/compress` on Fastify,
 * `compression()` on Express. A JSON response of at least 1 KiB to a client that accepts gzip is
 * compressed (by @fastify/compress as a stream): it must still run once, be stored, and replay
 * the same JSON readable with and without Accept-Encoding; in single-commit mode one ledger row.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fastifyCompress from '@fastify/compress';
import { Body, Controller, Module, Post, StreamableFile } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import compression from 'compression';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import {
  Idempotent,
  IdempotencyCtx,
  IdempotencyModule,
  type IdempotencyContext,
} from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send, type RawResponse } from '../fixtures/http-client.js';
import { listenApp } from '../fixtures/listen.js';

/**
 * `@fastify/compress` compresses a payload below its `syncThreshold` (which depends on the
 * machine's cores) in one piece, a larger one as a stream: `fastify-stream` forces the stream.
 */
type Setup = 'fastify' | 'fastify-stream' | 'express';

interface ChargeBody {
  ref: string;
}

/** Well above 1 KiB (the default threshold of both plugins) once serialized. */
const receipt = (ref: string, n: number) => ({
  ref,
  n,
  lines: Array.from({ length: 40 }, (_, i) => ({ line: i, text: `item ${i} of ${ref}` })),
});

const runs = new Map<string, number>();
const ran = (ref: string) => runs.get(ref) ?? 0;

@Controller('pay')
class PayController {
  @Post()
  @Idempotent()
  charge(@Body() body: ChargeBody) {
    runs.set(body.ref, ran(body.ref) + 1);
    return receipt(body.ref, ran(body.ref));
  }

  @Post('single')
  @Idempotent({ transactional: 'single' })
  async single(@Body() body: ChargeBody, @IdempotencyCtx() idem: IdempotencyContext) {
    runs.set(body.ref, ran(body.ref) + 1);
    await idem.manager!.query(`INSERT INTO ledger (ref) VALUES ($1)`, [body.ref]);
    return receipt(body.ref, ran(body.ref));
  }

  @Post('file')
  @Idempotent()
  file(@Body() body: ChargeBody) {
    runs.set(body.ref, ran(body.ref) + 1);
    const json = JSON.stringify(receipt(body.ref, ran(body.ref)));
    return new StreamableFile(Readable.from([Buffer.from(json)]), { type: 'application/json' });
  }
}

/** The body as JSON, gunzipped when the server says it is gzip. */
function decoded(res: RawResponse): unknown {
  const encoding = res.headers['content-encoding'];
  const body = encoding === 'gzip' ? gunzipSync(res.body) : res.body;
  if (encoding && encoding !== 'gzip' && encoding !== 'identity') {
    throw new Error(`unexpected content-encoding ${encoding}`);
  }
  return JSON.parse(body.toString('utf8'));
}

const GZIP: [string, string][] = [['Accept-Encoding', 'gzip']];

describe.each<Setup>(['fastify', 'fastify-stream', 'express'])('compression on %s', (setup) => {
  let db: MigratedDatabase;
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    db = await createMigratedDatabase(`compress_${setup.replace('-', '_')}`);
    await db.dataSource.query(`CREATE TABLE ledger (id bigserial PRIMARY KEY, ref text NOT NULL)`);
    const options = {
      dataSource: db.dataSource,
      cleanup: { enabled: false },
      replayCache: false as const,
    };
    @Module({ imports: [IdempotencyModule.forRoot(options)], controllers: [PayController] })
    class AppModule {}
    const platform = setup === 'express' ? 'express' : 'fastify';
    ({ url, close } = await listenApp(AppModule, platform, async (app) => {
      if (setup === 'express') return app.use(compression());
      const syncThreshold = setup === 'fastify-stream' ? { syncThreshold: 0 } : {};
      return (app as NestFastifyApplication).register(
        fastifyCompress as never,
        syncThreshold as never,
      );
    }));
  });
  afterAll(async () => {
    await close?.();
    await db?.drop();
  });

  const ledgerRows = async (ref: string) =>
    Number(
      (await db.dataSource.query(`SELECT count(*)::int AS n FROM ledger WHERE ref = $1`, [ref]))[0]
        .n,
    );

  it.each(['/pay', '/pay/single'])(
    '%s: gzip-accepting client, 3 requests run once; replays decode to the same JSON',
    async (path) => {
      const key = randomUUID();
      const ref = randomUUID();
      const first = await send(url, path, { key, body: { ref }, headers: GZIP });
      expect(first.status).toBe(201);
      // The plugin really compressed it: the test would not test anything otherwise.
      expect(first.headers['content-encoding']).toBe('gzip');
      const expected = receipt(ref, 1);
      expect(decoded(first)).toEqual(expected);

      for (let i = 0; i < 2; i++) {
        const again = await send(url, path, { key, body: { ref }, headers: GZIP });
        expect(again.status).toBe(201);
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(decoded(again)).toEqual(expected);
      }
      // Without Accept-Encoding: plain, readable JSON.
      const plain = await send(url, path, { key, body: { ref } });
      expect(plain.status).toBe(201);
      expect(plain.headers['content-encoding'] ?? 'identity').toBe('identity');
      expect(JSON.parse(plain.text)).toEqual(expected);

      expect(ran(ref)).toBe(1);
      if (path === '/pay/single') expect(await ledgerRows(ref)).toBe(1);
      const [row] = await db.records('idempotency_key = $1', [key]);
      expect(row).toMatchObject({ status: 'completed', status_code: 201 });
      // Stored as it was before the content coding.
      expect(JSON.parse(row.response_raw.toString('utf8'))).toEqual(expected);
    },
  );

  it('first request without Accept-Encoding, replays with and without gzip', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const first = await send(url, '/pay', { key, body: { ref } });
    expect(first.headers['content-encoding'] ?? 'identity').toBe('identity');
    const expected = receipt(ref, 1);
    expect(JSON.parse(first.text)).toEqual(expected);
    const gzipped = await send(url, '/pay', { key, body: { ref }, headers: GZIP });
    expect(gzipped.headers['idempotent-replayed']).toBe('true');
    expect(decoded(gzipped)).toEqual(expected);
    const plain = await send(url, '/pay', { key, body: { ref } });
    expect(plain.body.equals(first.body)).toBe(true);
    expect(ran(ref)).toBe(1);
  });

  it("Node's fetch() (accepts gzip by default): 3 calls, one execution, the same JSON", async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const bodies: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${url}/pay/single`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ ref }),
      });
      expect(res.status).toBe(201);
      bodies.push(await res.json());
    }
    expect(bodies).toEqual([receipt(ref, 1), receipt(ref, 1), receipt(ref, 1)]);
    expect(ran(ref)).toBe(1);
    expect(await ledgerRows(ref)).toBe(1);
  });

  it('a genuine stream, compressed: completed without a body, a retry gets 409, one execution', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const first = await send(url, '/pay/file', { key, body: { ref }, headers: GZIP });
    expect(first.status).toBe(201);
    expect(first.headers['content-encoding']).toBe('gzip');
    expect(decoded(first)).toEqual(receipt(ref, 1));
    const again = await send(url, '/pay/file', { key, body: { ref }, headers: GZIP });
    expect(again.status).toBe(409);
    expect(again.json()).toMatchObject({
      code: 'idempotency_response_not_replayable',
      original_status: 201,
    });
    expect(ran(ref)).toBe(1);
  });
});
