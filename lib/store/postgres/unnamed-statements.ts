/**
 * The same statements without their names: pg then sends each as the unnamed statement (parse,
 * bind and execute in one round trip, the parse not kept), which works on whichever server
 * connection a transaction pooler hands out. Named ones are parsed once per connection, and a
 * pooler that does not track them (PgBouncer `pool_mode = transaction` before 1.21, or with
 * `max_prepared_statements = 0`) answers `already exists` / `does not exist`.
 */
export function withoutNames<T extends object>(statements: T): T {
  return Object.fromEntries(
    Object.entries(statements).map(([key, value]) => {
      if (typeof value !== 'object' || value === null || !('name' in value)) return [key, value];
      const { name: _name, ...unnamed } = value as { name: string };
      return [key, unnamed];
    }),
  ) as T;
}
