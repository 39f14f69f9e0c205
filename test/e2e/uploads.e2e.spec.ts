import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { send } from '../fixtures/http-client.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { multipart, startUploadsApp, type UploadsApp } from '../fixtures/uploads.fixture.js';
import { startFixtureApp, type FixtureApp } from '../fixtures/payments.fixture.js';

// multer's interceptors exist for Express only (see docs/limits-and-choices.md).
describe('uploaded files (FileInterceptor, multer) on express', () => {
  let db: MigratedDatabase;
  let u: UploadsApp;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-uploads-'));
    db = await createMigratedDatabase('uploads');
    u = await startUploadsApp(db.dataSource, dir);
  });
  afterAll(async () => {
    await u?.close();
    await db?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  // Same name, type and size: only the bytes differ.
  const upload = (path: string, key: string, content: string, note = 'invoice', field = 'file') => {
    const { body, contentType } = multipart([
      { name: 'note', value: note },
      { name: field, value: content, filename: 'scan.pdf', type: 'application/pdf' },
    ]);
    return send(u.url, path, { key, body, contentType });
  };

  it.each([
    ['@Idempotent() above @UseInterceptors(FileInterceptor)', '/uploads/idempotent-above', 'above'],
    ['@Idempotent() below @UseInterceptors(FileInterceptor)', '/uploads/idempotent-below', 'below'],
    ['@Idempotent() on the controller class', '/class-uploads', 'class'],
    ['disk storage (dest)', '/uploads/disk', 'disk'],
    ['FileFieldsInterceptor (req.files as a field map)', '/uploads/fields', 'fields'],
  ])(
    '%s: same file replays, another file with the same key is a mismatch',
    async (_, path, name) => {
      const k = randomUUID();
      const ran = u.exec.count(name);
      const first = await upload(path, k, 'AAAA-original');
      expect(first.status).toBe(201);
      expect(first.json()).toMatchObject({
        file: { name: 'scan.pdf', size: 13 },
        body: { note: 'invoice' },
      });

      const again = await upload(path, k, 'AAAA-original');
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body.equals(first.body)).toBe(true);

      const otherFile = await upload(path, k, 'BBBB-tampered');
      expect(otherFile.status).toBe(409);
      expect(otherFile.json()).toMatchObject({
        code: 'idempotency_key_reused_with_different_params',
      });

      const otherField = await upload(path, k, 'AAAA-original', 'receipt');
      expect(otherField.status).toBe(409);

      expect(u.exec.count(name)).toBe(ran + 1);
    },
  );

  it('tells a file in another form field apart from the same file in the expected one', async () => {
    const k = randomUUID();
    expect((await upload('/uploads/fields', k, 'same bytes')).status).toBe(201);
    const moved = await upload('/uploads/fields', k, 'same bytes', 'invoice', 'extra');
    expect(moved.status).toBe(409);
  });
});

describe('uploaded files on fastify', () => {
  let db: MigratedDatabase;
  let f: FixtureApp;

  beforeAll(async () => {
    db = await createMigratedDatabase('uploads_fastify');
    f = await startFixtureApp({ platform: 'fastify', dataSource: db.dataSource });
  });
  afterAll(async () => {
    await f?.close();
    await db?.drop();
  });

  it('never reach the route without a multipart parser: Fastify answers 415 itself', async () => {
    const k = randomUUID();
    const { body, contentType } = multipart([
      { name: 'file', value: 'AAAA', filename: 'scan.pdf', type: 'application/pdf' },
    ]);
    const res = await send(f.url, '/charges', { key: k, body, contentType });
    expect(res.status).toBe(415);
    expect(res.json()).toEqual({ statusCode: 415, message: 'Unsupported Media Type' });
    expect(await db.records('idempotency_key = $1', [k])).toHaveLength(0);
    expect(f.exec.seq).toBe(0);
  });
});
