import pg from 'pg';
import type { QueryConfig, QueryResult } from '../../interfaces/idempotency-pool.interface.js';

/** What pg's Result builds from a RowDescription (fields, parsers, empty row), by key. */
type RowShape = Record<string, unknown>;
type Shapes = Map<string, RowShape>;
interface PgConnection {
  parsedStatements?: object;
  bind(config: object): void;
  close(config: object): void;
  sync(): void;
}
/** The parts of pg's JavaScript Query this relies on (pg 8: lib/query.js). */
declare class PgQuery {
  constructor(text: string);
  name?: string;
  portal: string;
  rows?: number;
  binary?: boolean;
  values: unknown[];
  callback?: (err: Error | null, result: QueryResult) => void;
  query_timeout?: number;
  _result: RowShape;
  _accumulateRows?: boolean;
  hasBeenParsed(connection: PgConnection): boolean;
  prepare(connection: PgConnection): void;
  handleRowDescription(msg: unknown): void;
  handleError(err: Error, connection: PgConnection): void;
  _getRows(connection: PgConnection, rows?: number): void;
}

interface PgResult {
  addFields(fields: object[]): void;
  parseRow(row: unknown[]): unknown;
}
const { Query, Result, utils } = pg as unknown as {
  Query?: typeof PgQuery;
  Result?: new () => PgResult & RowShape;
  utils?: { prepareValue?: unknown };
};
const prepareValue = utils?.prepareValue;

/**
 * The keys of pg's Result that its `addFields` sets, found by running it once; `undefined` (and
 * every statement described as pg does) unless copying just those keys to a new Result parses a
 * row as the described one does. This pg's internals are checked, not assumed from its version.
 */
const shapeKeys = ((): string[] | undefined => {
  if (Result === undefined) return undefined;
  try {
    const described = new Result();
    const before = { ...described };
    described.addFields([{ name: 'n', dataTypeID: 23, format: 'text' }]);
    const keys = Object.keys(described).filter((key) => described[key] !== before[key]);
    const copy = new Result();
    for (const key of keys) copy[key] = described[key];
    const row = copy.parseRow(['7']) as { n?: unknown };
    return row.n === 7 && keys.includes('fields') ? keys : undefined;
  } catch {
    return undefined;
  }
})();
const shapesByConnection = new WeakMap<PgConnection, Shapes>();

/**
 * pg asks the server to describe a statement's result on every execution (Describe), and turns
 * the answer's column list into new field objects, parsers and an empty row each time. A named
 * statement's result columns cannot change on a connection (PostgreSQL refuses to execute a
 * prepared statement whose result type changed), so they are kept from its first execution there,
 * and later executions send Bind, Execute and Sync alone.
 */
const DescribedOnceQuery =
  Query &&
  class DescribedOnceQuery extends Query {
    constructor(
      config: QueryConfig,
      private readonly shapes: Shapes,
    ) {
      // From its text alone: pg copies a config object property by property through
      // Object.getOwnPropertyDescriptors into a slow-mode object (~5 µs per statement).
      super(config.text);
      this.name = config.name;
      this.values = config.values;
    }

    override prepare(connection: PgConnection): void {
      const shape = this.shapes.get(this.name as string);
      if (shape === undefined || this.rows || !this.hasBeenParsed(connection)) {
        return super.prepare(connection);
      }
      try {
        connection.bind({
          portal: this.portal,
          statement: this.name,
          values: this.values,
          binary: this.binary,
          valueMapper: prepareValue,
        });
      } catch (err) {
        connection.close({ type: 'S', name: this.name });
        connection.sync();
        return this.handleError(err as Error, connection);
      }
      const result = this._result;
      for (const key of shapeKeys as string[]) result[key] = shape[key];
      this._accumulateRows = true;
      this._getRows(connection, this.rows);
    }

    override handleRowDescription(msg: unknown): void {
      super.handleRowDescription(msg);
      if (this.name === undefined) return;
      const shape: RowShape = {};
      for (const key of shapeKeys as string[]) shape[key] = this._result[key];
      this.shapes.set(this.name as string, shape);
    }
  };

/**
 * A statement as a described-once query when the client is pg's JavaScript client (the one this
 * module's `pg` builds); `undefined` for any other (pg-native, another copy of pg, another
 * driver), which the caller runs with its plain `query`. Unnamed statements run as pg runs them.
 */
export function queryDescribedOnce(
  client: object,
  config: QueryConfig,
  ms: number,
): Promise<QueryResult> | undefined {
  const connection = (client as { connection?: PgConnection }).connection;
  if (
    DescribedOnceQuery === undefined ||
    shapeKeys === undefined ||
    typeof prepareValue !== 'function' ||
    !(client instanceof pg.Client) ||
    connection?.parsedStatements === undefined
  ) {
    return undefined;
  }
  let shapes = shapesByConnection.get(connection);
  if (shapes === undefined) shapesByConnection.set(connection, (shapes = new Map()));
  const query = new DescribedOnceQuery(config, shapes);
  query.query_timeout = ms;
  return new Promise((resolve, reject) => {
    query.callback = (err, result) => (err ? reject(err) : resolve(result));
    (client as unknown as { query(q: PgQuery): unknown }).query(query);
  });
}
