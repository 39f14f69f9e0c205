import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { characters, scopeEndpoint } from '../../lib/request/scope-endpoint.js';

describe('scopeEndpoint', () => {
  it('keeps an endpoint of up to 255 characters as it is, counting code points as PostgreSQL does', () => {
    const exact = `POST /${'a'.repeat(249)}`;
    expect(scopeEndpoint(exact)).toBe(exact);
    const astral = `POST /${'😀'.repeat(249)}`;
    expect(astral.length).toBe(504);
    expect(characters(astral)).toBe(255);
    expect(scopeEndpoint(astral)).toBe(astral);
  });

  it('fits a longer one into 255 characters: its start, then the SHA-256 of the whole', () => {
    const long = `POST /${'segment/'.repeat(40)}`;
    const stored = scopeEndpoint(long);
    expect(characters(stored)).toBe(255);
    expect(stored.startsWith(long.slice(0, 189))).toBe(true);
    expect(stored.endsWith(` #${createHash('sha256').update(long).digest('hex')}`)).toBe(true);
    expect(scopeEndpoint(`${long}x`)).not.toBe(stored);
  });

  it('never cuts a surrogate pair in two', () => {
    for (const pad of [0, 1]) {
      const long = `POST /${'a'.repeat(182 + pad)}${'😀'.repeat(100)}`;
      const stored = scopeEndpoint(long);
      expect(stored).not.toMatch(
        /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/,
      );
      expect(characters(stored)).toBeLessThanOrEqual(255);
    }
  });
});
