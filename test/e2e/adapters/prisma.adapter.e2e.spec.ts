import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { QueryConfig } from 'pg';
import {
  prismaTransactions,
  type PrismaTransactionClient,
} from '../../../lib/adapters/prisma.transactions.js';
import { PrismaClient } from '../../fixtures/prisma/generated/client.js';
import { describeAdapterContract } from './adapter-contract.js';
import { describeModuleContract } from './module-contract.js';
import { adapterFixture, inTransaction, type AdapterFixture } from './adapter-fixture.js';

type Tx = PrismaTransactionClient<PrismaClient>;

const transactions = () => prismaTransactions((adapter) => new PrismaClient({ adapter }));
const insert = async (tx: Tx, id: string) => {
  await tx.note.create({ data: { id, body: 'prisma' } });
};

describeAdapterContract<Tx>('prisma', {
  bind: (client) => transactions().bind(client),
  insert,
  async ids(tx) {
    const rows = await tx.note.findMany({ orderBy: { id: 'asc' } });
    return rows.map((r) => r.id);
  },
  nested: (tx, work) => tx.$transaction((inner) => work(inner)),
  isolated: (tx, work) => tx.$transaction(work, { isolationLevel: 'Serializable' }),
});

describeModuleContract<Tx>('prisma', { transactions, insert });

describe("Prisma's implicit transactions on the handle", () => {
  let fx: AdapterFixture;
  beforeAll(async () => {
    fx = await adapterFixture('prisma_nested');
    await fx.pool.query(`CREATE TABLE authors (id text PRIMARY KEY);
      CREATE TABLE author_notes (id text PRIMARY KEY, author_id text NOT NULL REFERENCES authors)`);
  });
  afterAll(() => fx.close());

  it('runs a nested write, which Prisma wraps in a transaction, in a savepoint', async () => {
    const sent: string[] = [];
    await inTransaction(fx.pool, 'ROLLBACK', async (client) => {
      const recording = {
        query: (config: string | QueryConfig, values?: unknown[]) => {
          sent.push(typeof config === 'string' ? config : config.text);
          return client.query(config, values);
        },
      };
      const tx = prismaTransactions((adapter) => new PrismaClient({ adapter })).bind(recording);
      await tx.author.create({
        data: { id: 'a', notes: { create: [{ id: 'n1' }, { id: 'n2' }] } },
      });
      expect(await tx.authorNote.count()).toBe(2);
    });
    expect(sent[0]).toMatch(/^SAVEPOINT /);
    expect(sent.filter((s) => /^(BEGIN|COMMIT|ROLLBACK)\b/i.test(s))).toEqual([]);
    const { rows } = await fx.pool.query('SELECT count(*)::int AS n FROM authors');
    expect(rows[0].n).toBe(0);
  });
});
