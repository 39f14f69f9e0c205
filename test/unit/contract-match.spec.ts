import { describe, expect, it } from '@jest/globals';
import { anyOf, assertMatch } from '../../lib/testing/contract-match.js';

/** The store contract's assertion, in place of jest's toMatchObject, must fail where that fails. */
describe('assertMatch', () => {
  const outcome = {
    type: 'completed',
    recordId: '7',
    expiresAt: new Date(1_000),
    response: { statusCode: 201, headers: { a: '1', b: '2' }, body: Buffer.from('xy') },
  };

  it('passes on a subset, Buffers by bytes, Dates by time, anyOf by type', () => {
    expect(() =>
      assertMatch(outcome, {
        recordId: anyOf(String),
        expiresAt: new Date(1_000),
        response: { statusCode: anyOf(Number), headers: { a: '1' }, body: Buffer.from('xy') },
      }),
    ).not.toThrow();
  });

  it.each([
    [{ type: 'claimed' }],
    [{ recordId: anyOf(Number) }],
    [{ expiresAt: new Date(2_000) }],
    [{ response: { body: Buffer.from('xz') } }],
    [{ response: { headers: { c: '3' } } }],
    [{ missing: undefined, response: { omitted: 'digest' } }],
  ])('fails on %o', (expected) => {
    expect(() => assertMatch(outcome, expected)).toThrow();
  });

  it('fails when the actual value is null', () => {
    expect(() => assertMatch(null, { secondsLeft: anyOf(Number) })).toThrow();
  });
});
