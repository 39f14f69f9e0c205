/**
 * A PostgreSQL array literal of uuids or finite numbers, as one string. pg's own conversion of a
 * JavaScript array builds one string per element (and formats each `Date` piece by piece), which
 * the replay audit paid for every record it writes.
 */
export function arrayLiteral(values: readonly (string | number)[]): string {
  for (const value of values) {
    if (typeof value === 'number' ? !Number.isFinite(value) : !UUID.test(value))
      throw new TypeError(
        `nestjs-pg-idempotency: ${String(value)} is not a uuid or a finite number`,
      );
  }
  return `{${values.join(',')}}`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
