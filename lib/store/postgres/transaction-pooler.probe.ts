import { randomBytes } from 'node:crypto';
import { type Queryable, queryWithin, withinMs } from './pg-deadline.js';

/** pg's Pool as far as the probe needs it: its client class and connection options. */
export interface ClientFactory {
  Client: new (options: unknown) => Queryable & { connect(): Promise<void>; end(): Promise<void> };
  options: Record<string, unknown>;
}

const DUPLICATE_PREPARED_STATEMENT = '42P05';
const UNDEFINED_PREPARED_STATEMENT = '26000';

/**
 * Whether named prepared statements survive between statements on one connection. Two
 * connections of their own (the app's pool is left alone) prepare the same name in turn, then the
 * first runs it again: on a server or a session pooler each connection has its own backend, so
 * both work; behind a transaction pooler that does not track them, the second lands on the
 * backend the first just prepared on (`already exists`) or the first lands elsewhere (`does not
 * exist`). A pooler that does track them (PgBouncer >= 1.21 with `max_prepared_statements > 0`)
 * passes. Returns the reason to refuse start-up, or null.
 */
export async function probeTransactionPooler(
  pool: ClientFactory,
  timeoutMs: number,
): Promise<string | null> {
  const clients = [new pool.Client(pool.options), new pool.Client(pool.options)];
  try {
    await Promise.all(clients.map((c) => withinMs(c.connect(), timeoutMs)));
    const [a, b] = clients;
    // A few rounds: a busy pooler may hand the two connections different backends once.
    for (let round = 0; round < 3; round++) {
      const probe = {
        name: `idem_probe_${randomBytes(6).toString('hex')}`,
        text: 'SELECT pg_backend_pid() AS pid',
        values: [],
      };
      for (const client of [a, b, a]) {
        try {
          await queryWithin(client, probe, timeoutMs);
        } catch (err) {
          const code = (err as { code?: string }).code;
          if (code !== DUPLICATE_PREPARED_STATEMENT && code !== UNDEFINED_PREPARED_STATEMENT) {
            throw err;
          }
          return `named prepared statements do not survive between statements (${(err as Error).message}): the DataSource points at a transaction pooler (e.g. PgBouncer with pool_mode = transaction) that does not track them. Set \`preparedStatements: false\` in IdempotencyModule's options, or use PgBouncer >= 1.21 with max_prepared_statements > 0, or session pooling.`;
        }
      }
    }
    return null;
  } finally {
    // Ended, not pooled: what they prepared goes with them.
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  }
}
