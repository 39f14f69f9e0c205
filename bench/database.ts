/** The run's own database: created from the admin URL, migrated like an app would, dropped at the end. */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { idempotencyMigrations } from '../migrations/index.js';

const PAYMENTS = `CREATE TABLE bench_payments (
  id              bigserial   PRIMARY KEY,
  idempotency_key text,
  amount          integer     NOT NULL,
  variant         text        NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
)`;

export interface RowsSince {
  rows: number;
  /** Keys with more than one row: an operation that ran twice. */
  duplicateKeys: number;
}

export class BenchDatabase {
  private constructor(
    readonly name: string,
    readonly url: string,
    private readonly adminUrl: string,
    private readonly pool: pg.Pool,
  ) {}

  static async create(adminUrl: string): Promise<BenchDatabase> {
    const name = `bench_${randomBytes(5).toString('hex')}`;
    await withClient(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`));
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    const dataSource = new DataSource({
      type: 'postgres',
      url: url.href,
      migrations: idempotencyMigrations,
    });
    try {
      await dataSource.initialize();
      await dataSource.runMigrations();
      await dataSource.query(PAYMENTS);
    } finally {
      if (dataSource.isInitialized) await dataSource.destroy();
    }
    return new BenchDatabase(
      name,
      url.href,
      adminUrl,
      new pg.Pool({ connectionString: url.href, max: 2 }),
    );
  }

  /** Highest bench_payments id so far: a cell counts the rows after it. */
  async lastId(): Promise<string> {
    const { rows } = await this.pool.query(
      `SELECT coalesce(max(id), 0)::text AS id FROM bench_payments`,
    );
    return rows[0].id;
  }

  async rowsSince(id: string): Promise<RowsSince> {
    const { rows } = await this.pool.query(
      `SELECT count(*)::int AS rows,
              (SELECT count(*)::int FROM (
                 SELECT 1 FROM bench_payments WHERE id > $1 AND idempotency_key IS NOT NULL
                  GROUP BY idempotency_key HAVING count(*) > 1) d) AS duplicate_keys
         FROM bench_payments WHERE id > $1`,
      [id],
    );
    return { rows: rows[0].rows, duplicateKeys: rows[0].duplicate_keys };
  }

  /**
   * Starts every cell right after a checkpoint, so no cell pays for one mid-run or for the
   * full-page writes that follow it more than another. Needs a superuser (or pg_checkpoint).
   */
  async checkpoint(): Promise<boolean> {
    return this.pool.query('CHECKPOINT').then(
      () => true,
      () => false,
    );
  }

  /** PostgreSQL backends connected to the bench database, for their CPU time. */
  async backendPids(): Promise<number[]> {
    const { rows } = await this.pool.query(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    return rows.map((r) => Number(r.pid));
  }

  async drop(): Promise<void> {
    await this.pool.end();
    await withClient(this.adminUrl, (c) =>
      c.query(`DROP DATABASE IF EXISTS ${this.name} WITH (FORCE)`),
    );
  }
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
