import { describe, expect, it } from '@jest/globals';
import { normalizePattern } from '../../lib/transports/value/rpc-request.js';

describe('normalizePattern (the RPC scope endpoint)', () => {
  it('one object pattern, whatever its key order and spacing, nested objects included', () => {
    const forms = [
      '{"cmd":"charge","v":1,"x":{"b":2,"a":1}}',
      '{"x":{"a":1,"b":2},"v":1,"cmd":"charge"}',
      '{ "v" : 1 ,\n "cmd": "charge", "x": { "b": 2, "a": 1 } }',
    ];
    expect(new Set(forms.map(normalizePattern))).toEqual(
      new Set(['{"cmd":"charge","v":1,"x":{"a":1,"b":2}}']),
    );
    expect(normalizePattern({ v: 1, cmd: 'charge' })).toBe('{"cmd":"charge","v":1}');
  });

  it('string and number patterns stay as Nest routes them; other values differ from objects', () => {
    expect(normalizePattern('payments.create')).toBe('payments.create');
    expect(normalizePattern(' payments.create')).toBe(' payments.create');
    expect(normalizePattern('42')).toBe('42');
    expect(normalizePattern(42)).toBe('42');
    // Nest's getRouteFromPattern JSON-parses what is sent (found by helper-63).
    expect(normalizePattern('"charge"')).toBe('charge');
    expect(new Set(['7', '7.0', ' 7', 7].map(normalizePattern))).toEqual(new Set(['7']));
    expect(normalizePattern('{"cmd":"a"}')).not.toBe(normalizePattern('{"cmd":"b"}'));
  });

  it('as Nest routes it: an array is an object of its indexes, five levels deep, a RegExp its text', () => {
    // Found by helper-65: Nest's Redis client sends the route, its TCP client the raw pattern.
    expect(normalizePattern({ cmd: 'charge', tags: ['card'] })).toBe(
      '{"cmd":"charge","tags":{"0":"card"}}',
    );
    expect(normalizePattern('{"tags":["card"],"cmd":"charge"}')).toBe(
      '{"cmd":"charge","tags":{"0":"card"}}',
    );
    const deep = (g: number) => ({ a: { b: { c: { d: { e: { f: { g } } } } } } });
    expect(normalizePattern(deep(1))).toBe(normalizePattern(deep(2)));
    expect(normalizePattern(/orders\..+/)).toBe('/orders\\..+/');
  });
});
