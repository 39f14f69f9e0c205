import { describe, expect, it } from '@jest/globals';
import { jsonCopy } from '../../lib/store/postgres/json-copy.js';

const wire = (text: string, type = 'application/json; charset=utf-8') => ({
  statusCode: 201,
  headers: { 'content-type': type },
  body: Buffer.from(text),
});

describe('jsonCopy (the queryable jsonb copy of a response)', () => {
  it('keeps ordinary JSON, including ids that look like exponents inside strings', () => {
    const text = '{"id":"pay_3b6d6e34778ab","amount":1e3,"pair":"\\ud83d\\ude00"}';
    expect(jsonCopy(wire(text))).toEqual({ text, value: JSON.parse(text) });
  });

  it.each([
    ['a NUL escape', '{"a":"\\u0000"}'],
    ['a lone high surrogate', '{"a":"\\ud800"}'],
    ['a lone low surrogate', '{"a":"x\\udc00"}'],
    ['a lone surrogate in a key', '{"\\udbff":1}'],
    ['an exponent numeric cannot hold', '{"a":1e200000}'],
    ['a negative exponent numeric cannot hold', '[1.5e-99999]'],
    ['text that is not JSON', '{"a":'],
  ])('skips the copy for %s', (_, text) => {
    expect(jsonCopy(wire(text))).toBeUndefined();
  });

  it('makes no copy of a body that is not JSON', () => {
    expect(jsonCopy(wire('{"a":1}', 'text/plain'))).toBeUndefined();
  });
});
