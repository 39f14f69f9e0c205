import pg from 'pg';
import type { QueryConfig, QueryResult } from '../../interfaces/idempotency-pool.interface.js';
import { DescribedResult, type KeptColumns, type PgField } from './described-once.result.js';
import { STORE_TYPES, type TypeSource } from './store-types.js';

/** A RowDescription as pg-protocol parsed it: the result's columns. */
interface RowDescription {
  fields: PgField[];
}
/** Per statement name, the columns of its first RowDescription on one connection. */
type Described = Map<string, KeptColumns>;
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
  callback?: (err: Error | null, result?: QueryResult) => void;
  query_timeout?: number;
  types?: TypeSource;
  _result: { _types?: TypeSource };
  _results: unknown;
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
/** pg's Query keeps its result in `_result` (and `_results` for a single statement). */
function queryKeepsItsResult(): boolean {
  if (!usable || DescribedResult === undefined) return false;
  const probe = new (Query as typeof PgQuery)('SELECT 1');
  return probe._result instanceof pg.Result && probe._results === probe._result;
}
const keptResults = queryKeepsItsResult();
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
      /** Its result, when it builds the kept columns' empty row once (see DescribedResult). */
      private result: InstanceType<NonNullable<typeof DescribedResult>> | undefined = undefined;

      constructor(
        config: QueryConfig,
        private readonly described: Described,
      ) {
        // From its text alone: pg copies a config object property by property through
        // Object.getOwnPropertyDescriptors into a slow-mode object (~5 µs per statement).
        super(config.text);
        this.name = config.name;
        this.values = config.values;
        this.types = STORE_TYPES;
        if (keptResults) {
          this._result = this._results = this.result = new DescribedResult!(undefined, STORE_TYPES);
        } else this._result._types = STORE_TYPES;
      }

      override prepare(connection: PgConnection): void {
        // Text results on a `binary: true` client too: the store's parsers are text parsers.
        this.binary = false;
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
        if (this.result) this.result.kept = description;
        super.handleRowDescription(description);
        this._getRows(connection, this.rows);
      }

      override handleRowDescription(msg: RowDescription): void {
        if (this.name === undefined) return super.handleRowDescription(msg);
        const kept: KeptColumns = { fields: msg.fields, empty: undefined };
        if (this.result) this.result.kept = kept;
        super.handleRowDescription(msg);
        this.described.set(this.name, kept);
      }
    }
  : undefined;

/** How a statement's end is reported: pg's query callback. */
export type StatementCallback = (err: Error | null, result?: QueryResult) => void;

/**
 * Submits a statement as a described-once query when the client is pg's JavaScript client (the
 * one this module's `pg` builds) with its class's own `query`; false for any other (pg-native,
 * another copy of pg, another driver, or a `query` replaced on the client, whose wrapper may
 * expect the promise pg returns for a config object), which the caller runs with its plain
 * `query`. Unnamed statements run as pg runs them. `callback` is pg's query callback.
 */
export function submitDescribedOnce(
  client: object,
  config: QueryConfig,
  ms: number,
  callback: StatementCallback,
): boolean {
  const connection = (client as { connection?: PgConnection }).connection;
  if (
    DescribedOnceQuery === undefined ||
    !(client instanceof pg.Client) ||
    (client as { query: unknown }).query !== pg.Client.prototype.query ||
    connection?.parsedStatements === undefined
  ) {
    return false;
  }
  let described = describedByConnection.get(connection);
  if (described === undefined) describedByConnection.set(connection, (described = new Map()));
  const query = new DescribedOnceQuery(config, described);
  query.query_timeout = ms;
  query.callback = callback;
  (client as unknown as { query(q: PgQuery): unknown }).query(query);
  return true;
}
