/**
 * Per-request cost of each transaction adapter, outside HTTP: binding alone (on a client that
 * answers without a database), then binding plus the handle's first query (Prisma connects its
 * client lazily there) over the same SELECT sent by plain pg, on one connection inside one
 * transaction, sequential.
 *
 *   npm run bench:build && node --expose-gc dist-bench/bench/adapter-bind.js [iterations]
 */
import { drizzle } from 'drizzle-orm/node-postgres';
import { pgTable, text } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { sql as kyselySql } from 'kysely';
import pg from 'pg';
import { EntitySchema, MikroORM } from '@mikro-orm/postgresql';
import { drizzleTransactions } from '../lib/adapters/drizzle.transactions.js';
import { kyselyTransactions } from '../lib/adapters/kysely.transactions.js';
import { mikroOrmTransactions } from '../lib/adapters/mikro-orm.transactions.js';
import { prismaTransactions } from '../lib/adapters/prisma.transactions.js';
import type { TransactionClient } from '../lib/adapters/transaction-client.js';
import { PrismaClient } from '../test/fixtures/prisma/generated/client.js';

const url = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const iterations = Number(process.argv[2] ?? 2000);

const benchTable = pgTable('bench', { id: text().primaryKey() });

const orm = MikroORM.initSync({
  clientUrl: url,
  entities: [
    new EntitySchema({ name: 'Bench', properties: { id: { type: 'string', primary: true } } }),
  ],
});

const tools: Record<string, (client: TransactionClient) => Promise<unknown>> = {
  pg: (client) => client.query('SELECT 1 AS one'),
  drizzle: (client) =>
    drizzleTransactions((c) => drizzle(c))
      .bind(client)
      .execute(sql`SELECT 1 AS one`),
  kysely: (client) => kyselySql`SELECT 1 AS one`.execute(kyselyTransactions().bind(client)),
  'mikro-orm': (client) => mikroOrmTransactions(orm).bind(client).execute('SELECT 1 AS one'),
  prisma: (client) =>
    prismaTransactions((adapter) => new PrismaClient({ adapter })).bind(client)
      .$queryRaw`SELECT 1 AS one`,
};

// Prisma's own cost per query on a handle already built: the rest of `prisma` is the binding.
let reused: { $queryRaw: PrismaClient['$queryRaw'] } | undefined;
tools['prisma, handle reused'] = (client) => {
  reused ??= prismaTransactions((adapter) => new PrismaClient({ adapter })).bind(client);
  return reused.$queryRaw`SELECT 1 AS one`;
};
tools['pg, again'] = tools.pg;

const noDatabase = {
  query: () => Promise.resolve({ rows: [], rowCount: 0, command: 'SELECT', oid: 0, fields: [] }),
};
const binds: Record<string, (client: TransactionClient) => unknown> = {
  drizzle: drizzleTransactions().bind,
  'drizzle with schema': drizzleTransactions((c) => drizzle(c, { schema: { bench: benchTable } }))
    .bind,
  kysely: kyselyTransactions().bind,
  'mikro-orm': mikroOrmTransactions(orm).bind,
  prisma: prismaTransactions((adapter) => new PrismaClient({ adapter })).bind,
};
for (const [name, bind] of Object.entries(binds)) {
  for (let i = 0; i < 1000; i++) bind(noDatabase);
  const started = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) bind(noDatabase);
  const micros = Number(process.hrtime.bigint() - started) / 1000 / iterations;
  console.log(`${name.padEnd(22)} ${micros.toFixed(1).padStart(7)} µs per bind alone`);
}

const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
const client = new pg.Client({ connectionString: url });
await client.connect();
await client.query('BEGIN');
for (const [name, bindAndQuery] of Object.entries(tools)) {
  for (let i = 0; i < 200; i++) await bindAndQuery(client);
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  const started = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) await bindAndQuery(client);
  const micros = Number(process.hrtime.bigint() - started) / 1000 / iterations;
  gc();
  const heapKb = (process.memoryUsage().heapUsed - heapBefore) / 1024;
  console.log(
    `${name.padEnd(22)} ${micros.toFixed(1).padStart(7)} µs per bind + first query   heap after GC ${heapKb >= 0 ? '+' : ''}${heapKb.toFixed(0)} KB over ${iterations}`,
  );
}
await client.query('ROLLBACK');
await client.end();
await orm.close();
