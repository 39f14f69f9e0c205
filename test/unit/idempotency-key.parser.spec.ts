/**
 * The key header parser: which values name a key, which are refused (InvalidIdempotencyKeyError,
 * answered 400 idempotency_key_invalid), and that only HTTP whitespace (SP, HTAB) is trimmed, so a
 * key ending in 0xA0 (NBSP) is refused rather than taken as the key without it.
 */
import { describe, expect, it } from '@jest/globals';
import {
  InvalidIdempotencyKeyError,
  parseIdempotencyKey,
} from '../../lib/request/idempotency-key.parser.js';

const parse = (...values: string[]) =>
  parseIdempotencyKey(
    values.flatMap((v) => ['Idempotency-Key', v]),
    'idempotency-key',
  );

describe('parseIdempotencyKey', () => {
  it('returns undefined when the header is absent', () => {
    expect(
      parseIdempotencyKey(['Content-Type', 'application/json'], 'idempotency-key'),
    ).toBeUndefined();
  });

  it('matches the header name case-insensitively and trims surrounding whitespace', () => {
    expect(parseIdempotencyKey(['IDEMPOTENCY-KEY', '  abc-123 '], 'idempotency-key')).toBe(
      'abc-123',
    );
  });

  it('reads the quoted structured-field form as the same key, unescaping \\" and \\\\', () => {
    expect(parse('"8e03978e-40d5-43e8-bc93-6894a57f9324"')).toBe(
      '8e03978e-40d5-43e8-bc93-6894a57f9324',
    );
    expect(parse('"a \\"b\\" \\\\ c"')).toBe('a "b" \\ c');
  });

  it.each([
    ['empty', ''],
    ['only quotes', '""'],
    ['blank', '   '],
    ['too long', 'x'.repeat(256)],
    ['a space inside a bare key', 'a b'],
    ['a comma (a list, i.e. two keys)', 'a,b'],
    ['a control character', 'a\u0001b'],
    ['non-ASCII', 'clé'],
    ['an unterminated quote', '"abc'],
    ['text after the closing quote', '"abc"def'],
    ['a bad escape', '"a\\nb"'],
    ['non-ASCII inside quotes', '"clé"'],
    // HTTP whitespace is SP and HTAB only; String.prototype.trim() also strips these.
    ['ended by a no-break space (0xA0)', 'abc-123\u00a0'],
    ['started by a no-break space (0xA0)', '\u00a0abc-123'],
    ['a quoted key followed by a no-break space', '"abc"\u00a0'],
    ['ended by another Unicode space (U+2003)', 'abc-123\u2003'],
    ['ended by a BOM (U+FEFF)', 'abc-123\ufeff'],
    ['ended by a line feed', 'abc-123\n'],
  ])('refuses a key that is %s', (_what, value) => {
    expect(() => parse(value)).toThrow(InvalidIdempotencyKeyError);
  });

  it('trims only spaces and horizontal tabs around the key', () => {
    expect(parse('\t abc-123 \t')).toBe('abc-123');
    expect(parse(' "abc" ')).toBe('abc');
  });

  it('accepts exactly 255 characters', () => {
    expect(parse('k'.repeat(255))).toHaveLength(255);
  });

  it('refuses the header sent twice, even with the same value', () => {
    expect(() => parse('a', 'a')).toThrow(/once/);
  });
});
