import pg from 'pg';
import type { QueryConfig, QueryResult } from '../../interfaces/idempotency-pool.interface.js';

/** A RowDescription as pg-protocol parsed it: the result's columns. */
interface RowDescription {
  fields: unknown[];
}
/** Per statement name, the columns of its first RowDescription on one connection. */
type Described = Map<string, RowDescription>;
interface PgConnection {
  parsedStatements?: object;
  bind(config: object): void;
  close(config: object): void;
  sync(): void;
}
/** The parts of pg's JavaScript Query this relies on (pg 8: lib/query.js), checked below. */
declare class PgQuery {
  constructor(text: string);
  name?: string;
  portal: string;
  rows?: number;
  binary?: boolean;
  values: unknown[];
  callback?: (err: Error | null, result: QueryResult) => void;
  query_timeout?: number;
  hasBeenParsed(connection: PgConnection): boolean;
  prepare(connection: PgConnection): void;
  handleRowDescription(msg: RowDescription): void;
  handleError(err: Error, connection: PgConnection): void;
  _getRows(connection: PgConnection, rows?: number): void;
}

const { Query, utils } = pg as unknown as {
  Query?: typeof PgQuery;
  utils?: { prepareValue?: unknown };
};
const prepareValue = utils?.prepareValue;
const usable =
  typeof prepareValue === 'function' &&
  typeof Query === 'function' &&
  ['hasBeenParsed', 'prepare', 'handleRowDescription', 'handleError', '_getRows'].every(
    (method) =>
      typeof (Query.prototype as unknown as Record<string, unknown>)[method] === 'function',
  );
const describedByConnection = new WeakMap<PgConnection, Described>();

/**
 * pg asks the server to describe a prepared statement's result with every execution (Describe)
 * and parses the column list of each answer. A named statement's result columns cannot change on
 * a connection (PostgreSQL refuses to execute a prepared statement whose result type changed),
 * so they are kept from its first execution there: later executions send Bind, Execute and Sync
 * alone and hand pg's own `handleRowDescription` the kept columns, so the parsers are still pg's,
 * looked up on each execution (a type parser registered later applies as it would in pg).
 */
const DescribedOnceQuery = usable
  ? class DescribedOnceQuery extends (Query as typeof PgQuery) {
      constructor(
        config: QueryConfig,
        private readonly described: Described,
      ) {
        // From its text alone: pg copies a config object property by property through
        // Object.getOwnPropertyDescriptors into a slow-mode object (~5 µs per statement).
        super(config.text);
        this.name = config.name;
        this.values = config.values;
      }

      override prepare(connection: PgConnection): void {
        const description = this.described.get(this.name as string);
        if (description === undefined || this.rows || !this.hasBeenParsed(connection)) {
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
        super.handleRowDescription(description);
        this._getRows(connection, this.rows);
      }

      override handleRowDescription(msg: RowDescription): void {
        super.handleRowDescription(msg);
        if (this.name !== undefined) this.described.set(this.name, { fields: msg.fields });
      }
    }
  : undefined;

/**
 * A statement as a described-once query when the client is pg's JavaScript client (the one this
 * module's `pg` builds) with its class's own `query`; `undefined` for any other (pg-native,
 * another copy of pg, another driver, or a `query` replaced on the client, whose wrapper may
 * expect the promise pg returns for a config object), which the caller runs with its plain
 * `query`. Unnamed statements run as pg runs them.
 */
export function queryDescribedOnce(
  client: object,
  config: QueryConfig,
  ms: number,
): Promise<QueryResult> | undefined {
  const connection = (client as { connection?: PgConnection }).connection;
  if (
    DescribedOnceQuery === undefined ||
    !(client instanceof pg.Client) ||
    (client as { query: unknown }).query !== pg.Client.prototype.query ||
    connection?.parsedStatements === undefined
  ) {
    return undefined;
  }
  let described = describedByConnection.get(connection);
  if (described === undefined) describedByConnection.set(connection, (described = new Map()));
  const query = new DescribedOnceQuery(config, described);
  query.query_timeout = ms;
  return new Promise((resolve, reject) => {
    query.callback = (err, result) => (err ? reject(err) : resolve(result));
    (client as unknown as { query(q: PgQuery): unknown }).query(query);
  });
}
