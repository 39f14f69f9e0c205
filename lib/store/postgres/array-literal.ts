/**
 * PostgreSQL array literals, each one string. pg's own conversion of a JavaScript array builds a
 * string per element (and formats each `Date` piece by piece), which the replay audit paid for
 * every record it writes. Only values that cannot change the literal's meaning are taken.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function literal<T>(values: readonly T[], valid: (value: T) => boolean, what: string): string {
  for (const value of values) {
    if (!valid(value))
      throw new TypeError(`nestjs-pg-idempotency: ${String(value)} is not ${what}`);
  }
  return `{${values.join(',')}}`;
}

/** For a `uuid[]` parameter: ids in their canonical form, as the records table gives them. */
export const uuidArray = (ids: readonly string[]): string =>
  literal(ids, (id) => UUID.test(id), 'a uuid');

/** For a `float8[]` parameter. */
export const numberArray = (numbers: readonly number[]): string =>
  literal(numbers, Number.isFinite, 'a finite number');

/** For an `int8[]` or `int[]` parameter (past 2^53 a number prints in exponent form). */
export const integerArray = (integers: readonly number[]): string =>
  literal(integers, Number.isSafeInteger, 'a safe integer');
