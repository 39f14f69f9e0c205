import { describe, expect, it } from '@jest/globals';
import { canonicalJson, fingerprintRequest } from '../../lib/execution/request-fingerprint.js';

describe('canonicalJson', () => {
  it('sorts object keys at every depth and keeps array order', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}',
    );
  });

  it('agrees with JSON.stringify on what it drops and how it writes values', () => {
    const value = {
      s: 'é"\n',
      n: 1e21,
      f: () => 1,
      u: undefined,
      arr: [undefined, () => 1],
      d: new Date(0),
      neg: -0,
    };
    expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
  });

  it('handles nesting far deeper than the call stack allows', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(canonicalJson(deep)).toHaveLength(200_001);
  });
});

describe('fingerprintRequest', () => {
  it('is a SHA-256 hex digest', () => {
    expect(fingerprintRequest('POST', '/p', { a: 1 })).toMatch(/^[0-9a-f]{64}$/);
  });

  it('is the same for the same logical body in another key order', () => {
    expect(fingerprintRequest('POST', '/p', { a: 1, b: [1, 2] })).toBe(
      fingerprintRequest('POST', '/p', { b: [1, 2], a: 1 }),
    );
  });

  it.each([
    ['method', ['PUT', '/p', { a: 1 }]],
    ['path', ['POST', '/q', { a: 1 }]],
    ['body', ['POST', '/p', { a: 2 }]],
    ['array order', ['POST', '/p', { a: [2, 1] }]],
    ['string vs JSON body', ['POST', '/p', '{"a":1}']],
    ['no body', ['POST', '/p', undefined]],
  ] as [string, [string, string, unknown]][])('changes with the %s', (_what, args) => {
    const base = fingerprintRequest('POST', '/p', { a: [1, 2] });
    expect(fingerprintRequest(...args)).not.toBe(base);
  });

  it('hashes raw bodies by their bytes', () => {
    expect(fingerprintRequest('POST', '/p', Buffer.from('abc'))).toBe(
      fingerprintRequest('POST', '/p', Buffer.from('abc')),
    );
    expect(fingerprintRequest('POST', '/p', Buffer.from('abc'))).not.toBe(
      fingerprintRequest('POST', '/p', Buffer.from('abd')),
    );
  });
});
