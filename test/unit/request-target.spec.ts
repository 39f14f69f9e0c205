import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RequestRefusedError } from '../../lib/request/request-refused.error.js';
import { requestTarget } from '../../lib/request/request-target.js';
import { uploadedFiles } from '../../lib/request/uploaded-files.js';

const express = (o: { params?: object; query?: object; file?: object; files?: unknown } = {}) => ({
  method: 'POST',
  route: { path: '/payments/:id' },
  originalUrl: '/ignored?x=1',
  params: { id: 'p1' },
  query: {},
  ...o,
});

const file = (content: string, extra: object = {}) => ({
  fieldname: 'file',
  originalname: 'scan.pdf',
  mimetype: 'application/pdf',
  size: Buffer.byteLength(content),
  buffer: Buffer.from(content),
  ...extra,
});

describe('requestTarget', () => {
  it('adds the host name and the version only when there are some, so other hashes stay the same', () => {
    const plain = requestTarget(express());
    expect(requestTarget({ ...express(), hosts: {}, hostname: 'a.com' })).toBe(plain);
    expect(requestTarget(express(), 'POST', {})).toBe(plain);
    const acme = requestTarget({ ...express(), hosts: { t: 'acme' }, hostname: 'ACME.a.com' });
    expect(acme).toBe(`${plain}host "acme.a.com"\n`);
    // Two host patterns may give the same params: the name Nest matched tells them apart.
    expect(requestTarget({ ...express(), hosts: { t: 'acme' }, hostname: 'acme.b.com' })).not.toBe(
      acme,
    );
    expect(requestTarget(express(), 'POST', { version: '["2"]' })).toBe(`${plain}version ["2"]\n`);
    expect(requestTarget(express(), 'POST', { hosts: '["a.com"]' })).toBe(
      `${plain}hosts ["a.com"]\n`,
    );
  });

  it('is the route pattern, params, parsed query and files: not the raw URL', async () => {
    expect(await requestTarget(express({ query: { b: '2', a: '1' } }))).toBe(
      'POST /payments/:id\n{"id":"p1"}\n{"a":"1","b":"2"}\n',
    );
  });

  it('is the same for the query in any key order, and on Fastify', async () => {
    const fastify = {
      method: 'POST',
      routeOptions: { url: '/payments/:id' },
      url: '/PAYMENTS/p1/?a=1&b=2',
      params: Object.assign(Object.create(null), { id: 'p1' }),
      query: Object.assign(Object.create(null), { a: '1', b: '2' }),
    };
    expect(await requestTarget(fastify)).toBe(
      await requestTarget(express({ query: { b: '2', a: '1' } })),
    );
  });

  it.each([
    ['another param value', { params: { id: 'p2' } }],
    ['another query value', { query: { a: '2' } }],
    ['a repeated query parameter', { query: { a: ['1', '1'] } }],
    ['a file', { file: file('x') }],
  ])('changes with %s', async (_, change) => {
    expect(await requestTarget(express(change))).not.toBe(
      await requestTarget(express({ query: { a: '1' } })),
    );
  });
});

describe('uploadedFiles', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-files-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is undefined without uploads', async () => {
    expect(await uploadedFiles({ body: {} })).toBeUndefined();
  });

  it('describes a memory-stored file by field, name, type, size and SHA-256 of its bytes', async () => {
    expect(await uploadedFiles({ file: file('hello') })).toEqual({
      file: {
        field: 'file',
        name: 'scan.pdf',
        type: 'application/pdf',
        size: 5,
        sha256: createHash('sha256').update('hello').digest('hex'),
      },
    });
  });

  it('hashes a disk-stored file from disk: the same bytes give the same digest', async () => {
    const path = join(dir, 'upload');
    await writeFile(path, 'hello');
    const onDisk = await uploadedFiles({ file: file('hello', { buffer: undefined, path }) });
    expect(onDisk).toEqual(await uploadedFiles({ file: file('hello') }));
  });

  it('keeps the order of an array of files, and reads a field map in any order', async () => {
    const [a, b] = [file('a'), file('b')];
    expect(await uploadedFiles({ files: [a, b] })).not.toEqual(
      await uploadedFiles({ files: [b, a] }),
    );
    const map = await requestTarget(express({ files: { x: [a], y: [b] } }));
    expect(await requestTarget(express({ files: { y: [b], x: [a] } }))).toBe(map);
  });

  it('refuses a file it cannot read (a custom storage engine): 500, configuration error', async () => {
    const promise = uploadedFiles({ file: file('x', { buffer: undefined }) });
    await expect(promise).rejects.toBeInstanceOf(RequestRefusedError);
    await expect(promise).rejects.toMatchObject({ status: 500, code: 'idempotency_misconfigured' });
  });
});
