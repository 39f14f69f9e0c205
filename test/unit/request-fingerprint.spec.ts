import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import {
  canonicalJson,
  canonicalJsonOfRecord,
  fingerprintRequest,
  UnhashableValueError,
} from '../../lib/execution/request-fingerprint.js';

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

  it('refuses a cycle at once (as @fastify/multipart attachFieldsToBody builds one), not walking it until the heap is gone', () => {
    const body: Record<string, unknown> = {};
    body.note = { type: 'field', value: 'hello', fields: body };
    const list: unknown[] = [1];
    list.push({ back: list });
    expect(() => canonicalJson(body)).toThrow(UnhashableValueError);
    expect(() => canonicalJson(list)).toThrow(/cycle/);
    // The same object twice, not inside itself, is no cycle.
    const shared = { a: 1 };
    expect(canonicalJson({ x: shared, y: [shared, shared] })).toBe(
      '{"x":{"a":1},"y":[{"a":1},{"a":1}]}',
    );
  });

  it.each([
    ['a Promise', Promise.resolve('a')],
    ['a Map', new Map([['iban', 'DE00']])],
    ['a Set', new Set(['DE00'])],
  ])('refuses %s at any depth, whose JSON would be {}', (_what, value) => {
    expect(() => canonicalJson(value)).toThrow(UnhashableValueError);
    expect(() => canonicalJson({ details: [{ value }] })).toThrow(UnhashableValueError);
  });

  it.each([
    ['a File', () => new File(['pay alice 10'], 'a.txt')],
    ['a Blob', () => new Blob(['pay alice 10'])],
    ['an ArrayBuffer', () => new TextEncoder().encode('pay alice 10').buffer],
    ['URLSearchParams', () => new URLSearchParams('to=alice')],
    ['FormData', () => new FormData()],
    ['an instance with no fields', () => new (class Empty {})()],
    [
      'an instance whose own fields are all methods',
      () =>
        new (class Money {
          #cents = 1000;
          cents = () => this.#cents;
        })(),
    ],
  ])('refuses %s, whose JSON is {} whatever it holds', (_what, make) => {
    expect(() => canonicalJson({ doc: make() })).toThrow(UnhashableValueError);
  });

  it('writes Buffers, typed arrays, Dates and objects without a prototype as JSON.stringify does', () => {
    const value = {
      buf: Buffer.from([0, 1, 255]),
      bytes: new Uint8Array([3, 4]),
      at: new Date(0),
      bare: Object.assign(Object.create(null), { b: 1, a: 2 }),
      then: 'a field named then',
    };
    expect(canonicalJson(value)).toBe(
      '{"at":"1970-01-01T00:00:00.000Z","bare":{"a":2,"b":1},"buf":{"data":[0,1,255],"type":"Buffer"},"bytes":{"0":3,"1":4},"then":"a field named then"}',
    );
    expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
  });

  it("hashes objects on a bare prototype (Fastify's parsed forms and params) as plain ones", () => {
    function Empty() {}
    Empty.prototype = Object.create(null);
    const form = new (Empty as unknown as new () => Record<string, string>)();
    expect(canonicalJson(form)).toBe('{}');
    form.b = '2';
    form.a = '1';
    expect(canonicalJson(form)).toBe('{"a":"1","b":"2"}');
  });

  it('writes a bigint as its digits, as the number it equals', () => {
    expect(canonicalJson({ amount: 5n })).toBe(canonicalJson({ amount: 5 }));
    expect(canonicalJson([2n ** 64n])).toBe('[18446744073709551616]');
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

describe('the hot path keeps the stored hashes', () => {
  // The hash as it was computed part by part: records stored before must still match.
  const partByPart = (method: string, path: string, body: unknown) => {
    const hash = createHash('sha256').update(method).update('\n').update(path).update('\n');
    if (Buffer.isBuffer(body)) hash.update('b').update(body);
    else if (typeof body === 'string') hash.update('s').update(body);
    else if (body !== undefined) hash.update('j').update(canonicalJson(body));
    return hash.digest('hex');
  };

  it.each([
    ['JSON', { b: 'é', a: [1, { y: 2, x: null }] }],
    ['string', 'plain ünïcode'],
    ['bytes', Buffer.from([0, 255, 10])],
    ['nothing', undefined],
  ])('gives the part-by-part hash for a %s body', (_what, body) => {
    expect(fingerprintRequest('POST', 'POST /p\n{}\n{}\n', body)).toBe(
      partByPart('POST', 'POST /p\n{}\n{}\n', body),
    );
  });

  it('writes params and query as canonicalJson does, empty or not', () => {
    const inherited = Object.create({ z: 1 }) as object;
    const withToJson = { toJSON: () => ({ b: 1 }) };
    for (const value of [{}, { b: 1, a: undefined }, { a: undefined }, inherited, withToJson]) {
      expect(canonicalJsonOfRecord(value)).toBe(canonicalJson(value));
    }
    expect(canonicalJsonOfRecord(undefined)).toBe(canonicalJson({}));
  });
});
