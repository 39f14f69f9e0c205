import { describe, expect, it } from '@jest/globals';
import {
  EncodeBudget,
  plainJson,
  UnencodableValueError,
  ValueTooLargeError,
} from '../../lib/transports/value/json-value.js';
import { encodeValue } from '../../lib/transports/value/value-capture.js';

describe('plainJson: a returned value as JSON would write it, bounded', () => {
  it('matches JSON.stringify on what JSON can hold; a shared (acyclic) object is fine', () => {
    const shared = { a: 1 };
    const value = {
      when: new Date(0),
      list: [undefined, () => 1, shared, NaN],
      skip: undefined,
      fn: () => 1,
      again: shared,
    };
    expect(plainJson(value, new EncodeBudget(1_000))).toEqual(JSON.parse(JSON.stringify(value)));
  });

  it('refuses a cycle and a BigInt instead of walking or crashing', () => {
    const p: Record<string, unknown> = { id: 1 };
    p.account = { payments: [p] };
    expect(() => plainJson(p, new EncodeBudget(1_000_000))).toThrow(/cycle/);
    expect(() => plainJson({ amount: 1n }, new EncodeBudget(1_000))).toThrow(UnencodableValueError);
    expect(() => encodeValue({ amount: 1n }, 1_000)).toThrow(/BigInt/);
  });

  it('stops at the budget: a huge value is not walked to its end', () => {
    let read = 0;
    const item = {
      get x() {
        read++;
        return 'abcdefgh';
      },
    };
    const huge = new Array(1_000_000).fill(item);
    expect(() => plainJson(huge, new EncodeBudget(10_000))).toThrow(ValueTooLargeError);
    expect(read).toBeLessThan(1_000);
  });

  it('refuses a value nested deeper than it will follow', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 5_000; i++) deep = [deep];
    expect(() => plainJson(deep, new EncodeBudget(1_000_000))).toThrow(/nested too deeply/);
  });
});
