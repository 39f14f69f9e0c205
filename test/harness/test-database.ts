/**
 * A fresh, uniquely named PostgreSQL database per caller, on the server that
 * global-setup.ts exported as DATABASE_URL, so spec files can run in parallel
 * without seeing each other's tables.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { DataSource, type DataSourceOptions } from 'typeorm';

/** Extra TypeORM options (entities, logging, extra pool settings...) for the DataSources. */
export type PostgresOverrides = Partial<
  Omit<Extract<DataSourceOptions, { type: 'postgres' }>, 'type'>
>;

export interface TestDatabase {
  /** Database name: only [a-z0-9_]. */
  name: string;
  /** Connection URL of this database (same server and credentials as DATABASE_URL). */
  url: string;
  /** `type: 'postgres'` DataSource on `url`, NOT initialized. */
  dataSource: DataSource;
  /** Another DataSource on the same database (e.g. a second app instance), NOT initialized. */
  newDataSource(overrides?: PostgresOverrides): DataSource;
  /** Destroys every DataSource handed out, if initialized, then `DROP DATABASE ... WITH (FORCE)`. Idempotent. */
  drop(): Promise<void>;
}

export function adminUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) {
    throw new Error(
      'DATABASE_URL is not set: run through jest (its globalSetup provides PostgreSQL) or set it',
    );
  }
  return url;
}

/** Runs `fn` on a short-lived admin connection. */
export async function withAdminClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await connectAdmin(adminUrl());
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function createTestDatabase(
  prefix = 'test',
  overrides: PostgresOverrides = {},
): Promise<TestDatabase> {
  const name = uniqueName(prefix);
  await withAdminClient((client) => client.query(`CREATE DATABASE ${quoteIdent(name)}`));

  const url = withDatabase(adminUrl(), name);
  const handedOut: DataSource[] = [];
  const newDataSource = (more: PostgresOverrides = {}): DataSource => {
    const dataSource = new DataSource({ ...overrides, ...more, type: 'postgres', url });
    handedOut.push(dataSource);
    return dataSource;
  };
  let dropped = false;

  return {
    name,
    url,
    dataSource: newDataSource(),
    newDataSource,
    async drop() {
      if (dropped) return;
      dropped = true;
      await Promise.all(
        handedOut.map((ds) => (ds.isInitialized ? ds.destroy() : Promise.resolve())),
      );
      await withAdminClient((client) =>
        client.query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`),
      );
    },
  };
}

/** `<prefix>_<time>_<worker>_<random>`: lower-case [a-z0-9_] only, at most 63 bytes. */
function uniqueName(prefix: string): string {
  const safePrefix =
    prefix
      .toLowerCase()
      .replace(/[^a-z0-9_]+/g, '_')
      .replace(/^[^a-z]+/, '')
      .slice(0, 24) || 'test';
  const worker = (process.env.JEST_WORKER_ID ?? '0').replace(/\D/g, '') || '0';
  const name = `${safePrefix}_${Date.now().toString(36)}_w${worker}_${randomBytes(5).toString('hex')}`;
  if (!/^[a-z][a-z0-9_]{0,62}$/.test(name)) throw new Error(`bad generated name ${name}`);
  return name;
}

function quoteIdent(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`refusing identifier ${name}`);
  return `"${name}"`;
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Connects to the admin URL; if its database does not exist, to `postgres` on the same server. */
async function connectAdmin(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    return client;
  } catch (error) {
    await client.end().catch(() => undefined);
    if ((error as { code?: string }).code !== '3D000') throw error;
    const fallback = new pg.Client({ connectionString: withDatabase(url, 'postgres') });
    await fallback.connect();
    return fallback;
  }
}
