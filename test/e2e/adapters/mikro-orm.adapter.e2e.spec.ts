import { afterAll, describe, expect, it } from '@jest/globals';
import { EntitySchema, MikroORM, type EntityManager } from '@mikro-orm/postgresql';
import { mikroOrmTransactions } from '../../../lib/adapters/mikro-orm.transactions.js';
import { describeAdapterContract } from './adapter-contract.js';
import type { Note } from './adapter-fixture.js';
import { describeModuleContract } from './module-contract.js';

const NoteSchema = new EntitySchema<Note>({
  name: 'Note',
  tableName: 'notes',
  properties: { id: { type: 'string', primary: true }, body: { type: 'string' } },
});

// The app's ORM, on its own pool: the adapter must not use it (the contract counts connections).
let orm: MikroORM | undefined;
const adapter = () =>
  mikroOrmTransactions(
    (orm ??= MikroORM.initSync({
      entities: [NoteSchema],
      clientUrl: process.env.DATABASE_URL,
      discovery: { warnWhenNoEntities: false },
    })),
  );
afterAll(() => orm?.close());

const insert = async (em: EntityManager, id: string) => {
  em.create(NoteSchema, { id, body: 'mikro-orm' });
  await em.flush();
};

describeAdapterContract<EntityManager>('mikro_orm', {
  bind: (client) => adapter().bind(client),
  insert,
  async ids(em) {
    const rows = await em.find(
      NoteSchema,
      {},
      { orderBy: { id: 'asc' }, disableIdentityMap: true },
    );
    return rows.map((r) => r.id);
  },
  nested: (em, work) => em.transactional((inner) => work(inner)),
  isolated: (em, work) => em.transactional(work, { isolationLevel: 'serializable' as never }),
});

describeModuleContract<EntityManager>('mikro_orm', { transactions: adapter, insert });

describe("the app's MikroORM beside the adapter", () => {
  it('opened no connection of its own', () => {
    const { pool } = orm!.em.getKnex().client as any;
    expect(pool.numUsed() + pool.numFree() + pool.numPendingCreates()).toBe(0);
  });
});
