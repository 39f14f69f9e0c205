/**
 * What every adapter spec needs: its own database with a `notes` table, a pg Pool tagged with an
 * application_name (so the connections a tool opens can be counted in pg_stat_activity), a
 * transaction held the way the store holds it, and a lazy client whose first query sends BEGIN.
 */
import pg from 'pg';
import type { TransactionClient } from '../../../lib/adapters/transaction-client.js';
import { createTestDatabase, type TestDatabase } from '../../harness/test-database.js';

/** A row of the `notes` table every adapter spec writes. */
export interface Note {
  id: string;
  body: string;
}

export interface AdapterFixture {
  database: TestDatabase;
  pool: pg.Pool;
  applicationName: string;
  /** Ids in `notes`, as a connection outside the transaction sees them. */
  committedIds(): Promise<string[]>;
  /** Backends of this pool's application_name, counted from another connection. */
  connections(): Promise<number>;
  close(): Promise<void>;
}

export async function adapterFixture(tool: string): Promise<AdapterFixture> {
  const database = await createTestDatabase(`adapter_${tool}`);
  const applicationName = `adapter-${tool}-${process.pid}`;
  const pool = new pg.Pool({ connectionString: database.url, application_name: applicationName });
  const observer = new pg.Client({ connectionString: database.url });
  await observer.connect();
  await observer.query('CREATE TABLE notes (id text PRIMARY KEY, body text NOT NULL)');
  return {
    database,
    pool,
    applicationName,
    async committedIds() {
      const { rows } = await observer.query<{ id: string }>('SELECT id FROM notes ORDER BY id');
      return rows.map((r) => r.id);
    },
    async connections() {
      const { rows } = await observer.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1',
        [applicationName],
      );
      return rows[0].n;
    },
    async close() {
      await pool.end();
      await observer.end();
      await database.drop();
    },
  };
}

/** Runs `work` inside BEGIN ... COMMIT (or ROLLBACK) on one pooled connection, as the store does. */
export async function inTransaction<T>(
  pool: pg.Pool,
  end: 'COMMIT' | 'ROLLBACK',
  work: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query(end);
    return result;
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}

/** The default mode's client: BEGIN goes out with the first query, not before. */
export function lazyClient(client: pg.PoolClient): TransactionClient & { begun: boolean } {
  const lazy = {
    begun: false,
    async query(text: string | pg.QueryConfig, values?: unknown[]) {
      if (!lazy.begun) {
        lazy.begun = true;
        await client.query('BEGIN');
      }
      return client.query(text, values);
    },
  };
  return lazy;
}
