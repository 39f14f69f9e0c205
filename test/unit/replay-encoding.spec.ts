import { describe, expect, it } from '@jest/globals';
import { gzipSync } from 'node:zlib';
import { acceptsEncoding, replayFor } from '../../lib/http/replay-encoding.js';

describe('replay encoding', () => {
  it.each([
    [undefined, false],
    ['', false],
    ['gzip', true],
    ['GZIP, br', true],
    ['br;q=1.0, gzip;q=0.5', true],
    ['gzip;q=0', false],
    ['*', true],
    ['*;q=0', false],
    ['*, gzip;q=0', false],
    [['br', 'gzip'], true],
  ])('Accept-Encoding %j accepts gzip: %s', (header, accepted) => {
    expect(acceptsEncoding(header, 'gzip')).toBe(accepted);
  });

  const json = Buffer.from('{"ok":true}');
  const stored = {
    statusCode: 201,
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    body: gzipSync(json),
  };

  it('keeps a gzip body for a client that accepts it, decodes it for one that does not', () => {
    expect(replayFor(stored, 'gzip')).toBe(stored);
    const plain = replayFor(stored, undefined);
    expect(plain.body).toEqual(json);
    expect(plain.headers).toEqual({ 'content-type': 'application/json' });
  });

  it('leaves what it cannot decode as it was', () => {
    const bad = { ...stored, body: Buffer.from('not gzip') };
    expect(replayFor(bad, undefined)).toBe(bad);
    const unknown = { ...stored, headers: { 'content-encoding': 'zstd-x' } };
    expect(replayFor(unknown, undefined)).toBe(unknown);
  });
});
