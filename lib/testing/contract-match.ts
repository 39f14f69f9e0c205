import assert from 'node:assert/strict';

const ANY = Symbol('any value of a type');
type AnyOf = { readonly [ANY]: abstract new (...args: never[]) => unknown };

/** Stands for any value of `type` in `assertMatch` (`String`, `Number`, `Date`...). */
export const anyOf = (type: AnyOf[typeof ANY]): AnyOf => ({ [ANY]: type });

const isAnyOf = (v: unknown): v is AnyOf => typeof v === 'object' && v !== null && ANY in v;
const isOfType = (v: unknown, type: AnyOf[typeof ANY]) =>
  type === (String as unknown)
    ? typeof v === 'string'
    : type === (Number as unknown)
      ? typeof v === 'number'
      : v instanceof type;
const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && Object.getPrototypeOf(v) === Object.prototype;

/** `actual` cut down to the keys `expected` names, so a deep equality checks a subset. */
function project(actual: unknown, expected: unknown): unknown {
  if (isAnyOf(expected)) return isOfType(actual, expected[ANY]) ? expected : actual;
  if (
    isPlain(expected) &&
    typeof actual === 'object' &&
    actual !== null &&
    !Buffer.isBuffer(actual)
  ) {
    const record = actual as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(expected).map((k) => [k, project(record[k], expected[k])]),
    );
  }
  return actual;
}

/**
 * Every key of `expected` is in `actual` with an equal value (Buffers by their bytes, Dates by
 * their time); other keys of `actual` are ignored. Plain `node:assert`, so the contract runs
 * under any test runner.
 */
export function assertMatch(actual: unknown, expected: Record<string, unknown>): void {
  assert.deepStrictEqual(project(actual, expected), expected);
}
