/**
 * HEAD on an `@Idempotent()` GET route: Express and Fastify send it to the GET handler. It shares
 * GET's record (same scope, same fingerprint), never runs the handler for itself, and replays
 * GET's status and headers without the body.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Controller, Get, Header, Module, Param } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { Idempotent, IdempotencyModule } from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { listenApp, type ListeningApp } from '../fixtures/listen.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import type { Platform } from '../fixtures/payments.fixture.js';

const runs = new Map<string, number>();
/** Per id, what holds the handler until the test lets it finish. */
const gates = new Map<string, Promise<void>>();

@Controller('exports')
class ExportsController {
  @Get(':id')
  @Idempotent()
  @Header('etag', '"v1"')
  async create(@Param('id') id: string) {
    const n = (runs.get(id) ?? 0) + 1;
    runs.set(id, n);
    await gates.get(id);
    return { export: `exp_${id}`, run: n, status: 'generated' };
  }
}

async function waitUntil(probe: () => Promise<boolean>): Promise<void> {
  for (let i = 0; !(await probe()); i++) {
    if (i > 200) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe.each(['express', 'fastify'] as Platform[])(
  'HEAD on an idempotent GET (%s)',
  (platform) => {
    let db: MigratedDatabase;
    let app: ListeningApp;

    beforeAll(async () => {
      db = await createMigratedDatabase(`head_${platform}`);
      @Module({
        imports: [IdempotencyModule.forRoot({ dataSource: db.dataSource, replayCache: false })],
        controllers: [ExportsController],
      })
      class AppModule {}
      app = await listenApp(AppModule, platform);
    });
    afterAll(async () => {
      await app?.close();
      await db?.drop();
    });

    const call = (method: 'GET' | 'HEAD', id: string, key?: string) =>
      send(app.url, `/exports/${id}?format=csv`, { method, key });

    it("replays GET's status and headers, content-length included, without a body or a run", async () => {
      const id = randomUUID();
      const key = randomUUID();
      const first = await call('GET', id, key);
      expect(first.status).toBe(200);
      const head = await call('HEAD', id, key);
      expect({
        status: head.status,
        replayed: head.headers['idempotent-replayed'],
        length: head.headers['content-length'],
        type: head.headers['content-type'],
        etag: head.headers.etag,
        body: head.body.length,
      }).toEqual({
        status: 200,
        replayed: 'true',
        length: String(first.body.length),
        type: first.headers['content-type'],
        etag: '"v1"',
        body: 0,
      });
      expect(runs.get(id)).toBe(1);
      // The GET replay is still the original, whole.
      const again = await call('GET', id, key);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.text).toBe(first.text);
      const rows = await db.records('idempotency_key = $1', [key]);
      expect(rows.map((r) => r.endpoint)).toEqual(['GET /exports/:id']);
    });

    it('a HEAD before any GET runs nothing and claims nothing: 404 idempotency_nothing_to_replay', async () => {
      const id = randomUUID();
      const key = randomUUID();
      const head = await call('HEAD', id, key);
      expect(head.status).toBe(404);
      expect(head.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(runs.get(id)).toBeUndefined();
      expect(await db.records('idempotency_key = $1', [key])).toEqual([]);
      // The GET that follows runs once, as if the HEAD never came.
      const get = await call('GET', id, key);
      expect(get.status).toBe(200);
      expect(get.headers['idempotent-replayed']).toBeUndefined();
      expect(runs.get(id)).toBe(1);
    });

    it('a HEAD while the GET runs is refused like a GET: 409 with Retry-After', async () => {
      const id = randomUUID();
      const key = randomUUID();
      let open!: () => void;
      gates.set(id, new Promise<void>((resolve) => (open = resolve)));
      const get = call('GET', id, key);
      await waitUntil(async () => (await db.records('idempotency_key = $1', [key])).length > 0);
      const head = await call('HEAD', id, key);
      open();
      expect([head.status, head.headers['retry-after'], head.headers['content-type']]).toEqual([
        409,
        '2',
        'application/problem+json',
      ]);
      expect((await get).status).toBe(200);
      expect(runs.get(id)).toBe(1);
    });

    it('a HEAD sent with the first GET never makes that GET a false 409: HEAD only reads', async () => {
      const trials: string[] = [];
      for (let trial = 0; trial < 20; trial++) {
        const id = randomUUID();
        const key = randomUUID();
        const [head, get] = await Promise.all([call('HEAD', id, key), call('GET', id, key)]);
        // The HEAD saw nothing yet, the GET running, or its record: never a run of its own.
        expect([404, 409, 200]).toContain(head.status);
        trials.push(`GET ${get.status}, ran ${runs.get(id) ?? 0}`);
      }
      expect(trials).toEqual(Array(20).fill('GET 200, ran 1'));
    });

    it('a HEAD without a key is not idempotent, like a GET without one', async () => {
      const id = randomUUID();
      const head = await call('HEAD', id);
      expect(head.status).toBe(200);
      expect(head.headers['idempotent-replayed']).toBeUndefined();
      expect(runs.get(id)).toBe(1);
    });
  },
);
