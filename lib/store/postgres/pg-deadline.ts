import { type StatementCallback, submitDescribedOnce } from './described-once.query.js';
import { telemetry } from '../../telemetry/idempotency.telemetry.js';
import { ForeignParserError, foreignParser } from './foreign-parsers.check.js';
import { STORE_TYPES } from './store-types.js';
import type {
  Pool,
  PoolClient,
  Queryable,
  QueryConfig,
  QueryResult,
} from '../../interfaces/idempotency-pool.interface.js';

export type { Pool, PoolClient, Queryable, QueryConfig, QueryResult };

/** For a rejection or an 'error' event that changes nothing where it happens. */
export const ignoreError = (): undefined => undefined;

/** The pool's `max` (pg's default 10 when unset); undefined before the DataSource is initialized. */
export function poolMax(pool: Pool | undefined): number | undefined {
  if (!pool) return undefined;
  return (pool as { options?: { max?: number } }).options?.max || 10;
}

export class StoreTimeoutError extends Error {
  constructor(what: string, ms: number) {
    super(`nestjs-pg-idempotency: PostgreSQL did not answer ${what} within ${ms} ms`);
  }
}

/** `promise`, or a rejection once `ms` passed without it settling. */
export function withinMs<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no connection within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * A prepared statement with its values, in one object shape for every statement: a spread
 * (`{ ...statement, values }`) of the statements' differing shapes took V8's slow copy path.
 */
export function bound(statement: { name?: string; text: string }, values: unknown[]): QueryConfig {
  return { name: statement.name, text: statement.text, values };
}

/**
 * Ends a connection whose statement timed out, best effort: its socket is destroyed (by pg, or
 * by the caller) whatever `end()` does, so a throw or a rejection here changes nothing.
 */
export function endQuietly(client: { end?(): Promise<void> }): void {
  try {
    Promise.resolve(client.end?.()).catch(ignoreError);
  } catch {
    // See above: the socket goes anyway.
  }
}

/** One timer for statements sent together; `expired` once it fired (see `pipelineWithin`). */
export interface SharedDeadline {
  expired: boolean;
}

/** How `submitWithin` reports a statement's end, once: no error (`undefined`) and its result, or its error. */
export type StatementDone = (err: unknown, result?: QueryResult) => void;

/**
 * One statement on a client the caller holds, within `ms`. On timeout the connection is ended at
 * once (pg destroys the socket of a client with a query in flight), so a transaction on it fails
 * fast instead of queueing its ROLLBACK behind the hung query. One promise per statement, settled
 * from pg's callback: an async wrapper around pg's promise cost a second one and its hops.
 */
export function queryWithin(
  client: Queryable & { end?(): Promise<void> },
  config: QueryConfig,
  ms: number,
): Promise<QueryResult> {
  return new Promise((resolve, reject) =>
    submitWithin(client, config, ms, (err, result) =>
      err === undefined ? resolve(result as QueryResult) : reject(err),
    ),
  );
}

/**
 * `queryWithin` by callback, without a promise (a pipeline settles its statements together).
 * Under a `shared` deadline its owner times it: any error once that deadline expired is its
 * timeout.
 */
export function submitWithin(
  client: Queryable & { end?(): Promise<void> },
  config: QueryConfig,
  ms: number,
  done: StatementDone,
  shared?: SharedDeadline,
): void {
  // Set inside the try below: a throw there (the app's meter provider) is the statement's error,
  // reported through `done` like any other, never thrown at whoever submitted it.
  let timed: () => void = ignoreError;
  // pg may call back twice for one statement (an error, then its ReadyForQuery).
  let settled = false;
  const settle = (err: unknown, result?: QueryResult) => {
    if (settled) return;
    settled = true;
    try {
      timed();
    } catch (failed) {
      return done(failed ?? new Error(String(failed)));
    }
    if (err === undefined) return done(undefined, result);
    const late = shared?.expired || (err as Error | undefined)?.message === 'Query read timeout';
    if (!late) return done(err);
    endQuietly(client);
    done(new StoreTimeoutError(config.name ?? 'a statement', ms));
  };
  const callback: StatementCallback = (err, result) => settle(err ?? undefined, result);
  try {
    timed = telemetry.statement(config);
    // Under a shared deadline, pg starts no timer of its own (0 and none on the connection).
    const own = shared ? 0 : ms;
    if (submitDescribedOnce(client, config, own, callback)) return;
    const foreign = foreignParser(client);
    if (foreign !== null) return settle(new ForeignParserError(foreign));
    Promise.resolve(
      client.query({
        name: config.name,
        text: config.text,
        values: config.values,
        query_timeout: own,
        types: STORE_TYPES,
      }),
    ).then(
      (result) => settle(undefined, result),
      (err: unknown) => settle(err ?? new Error(String(err))),
    );
  } catch (err) {
    settle(err ?? new Error(String(err)));
  }
}
