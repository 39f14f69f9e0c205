import {
  endQuietly,
  type Queryable,
  type QueryConfig,
  type QueryResult,
  queryWithin,
  type SharedDeadline,
  submitWithin,
} from './pg-deadline.js';

interface PipelineCapable {
  end?(): Promise<void>;
  pipeline?: boolean;
  _sentQueryQueue?: unknown[];
  connection?: { stream?: { cork?(): void; uncork?(): void; destroy?(): void } };
  connectionParameters?: { query_timeout?: number };
}

/**
 * One timer for a pipeline's statements: sent in one write, each would start pg's own timer at
 * the same moment. Fired, it destroys the socket as pg's does for a pipelined statement (the
 * statements behind a hung one cannot be answered); each pending statement then fails with its
 * timeout. None where the connection has its own `query_timeout`: pg would time each anyway.
 */
function sharedDeadline(pg: PipelineCapable, ms: number) {
  if (pg.connectionParameters?.query_timeout) return undefined;
  const deadline: SharedDeadline = { expired: false };
  const timer = setTimeout(() => {
    deadline.expired = true;
    // Ended first, as a statement's own timeout did: pg then sees the close as asked for and
    // emits no 'error' (an app listening on its connections would report a lost connection).
    endQuietly(pg);
    pg.connection?.stream?.destroy?.();
  }, ms);
  return { deadline, clear: () => clearTimeout(timer) };
}

/**
 * Several statements in one round trip: pg's pipeline mode (pg >= 8.22), switched on for this
 * call only, sends them back to back, each with its own Sync, in one write; each still runs under
 * the deadline. Inside an explicit transaction they share it: a failed statement aborts the
 * transaction, so a COMMIT behind it rolls back (its command tag says ROLLBACK). Without pipeline
 * support, the statements run one after another. Every statement is answered (settled) before
 * this returns.
 */
export function pipelineWithin(
  client: Queryable,
  configs: QueryConfig[],
  ms: number,
): Promise<PromiseSettledResult<QueryResult>[]> {
  const pg = client as unknown as PipelineCapable;
  if (configs.length === 0 || pg.pipeline !== false || !Array.isArray(pg._sentQueryQueue)) {
    return oneAfterAnother(client, configs, ms);
  }
  return new Promise((resolve) => {
    const settled: PromiseSettledResult<QueryResult>[] = [];
    let left = configs.length;
    const stream = pg.connection?.stream;
    const shared = sharedDeadline(pg, ms);
    // Settled together from pg's callbacks: no promise per statement, none to gather them.
    const answered = (i: number) => (err: unknown, value?: QueryResult) => {
      settled[i] =
        err === undefined
          ? { status: 'fulfilled', value: value as QueryResult }
          : { status: 'rejected', reason: err };
      if (--left > 0) return;
      shared?.clear();
      pg.pipeline = false;
      resolve(settled);
    };
    pg.pipeline = true;
    stream?.cork?.();
    for (let i = 0; i < configs.length; i++) {
      submitWithin(client, configs[i], ms, answered(i), shared?.deadline);
    }
    stream?.uncork?.();
  });
}

async function oneAfterAnother(
  client: Queryable,
  configs: QueryConfig[],
  ms: number,
): Promise<PromiseSettledResult<QueryResult>[]> {
  const settled: PromiseSettledResult<QueryResult>[] = [];
  for (const config of configs) {
    settled.push(
      await queryWithin(client, config, ms).then(
        (value) => ({ status: 'fulfilled' as const, value }),
        (reason: unknown) => ({ status: 'rejected' as const, reason }),
      ),
    );
  }
  return settled;
}

/** The value of a pipelined statement, or its error thrown. */
export function settledValue<T>(settled: PromiseSettledResult<T>): T {
  if (settled.status === 'rejected') throw settled.reason;
  return settled.value;
}
