import { afterAll, beforeAll } from '@jest/globals';
import { DataSource, EntitySchema, type EntityManager } from 'typeorm';
import { typeormTransactions } from '../../../lib/index.js';
import { describeModuleContract } from './module-contract.js';
import type { Note } from './adapter-fixture.js';

const NoteSchema = new EntitySchema<Note>({
  name: 'Note',
  tableName: 'notes',
  columns: { id: { type: String, primary: true }, body: { type: String } },
});

// A TypeORM app that keeps its own pg pool beside the DataSource (initialized for its metadata;
// the handler's writes reach the store's connection, never this DataSource's pool).
const dataSource = new DataSource({
  type: 'postgres',
  url: process.env.DATABASE_URL,
  entities: [NoteSchema],
  extra: { max: 1 },
});
beforeAll(() => dataSource.initialize());
afterAll(() => dataSource.destroy());

describeModuleContract<EntityManager>('typeorm', {
  transactions: () => typeormTransactions(dataSource),
  async insert(manager, id) {
    await manager.insert(NoteSchema, { id, body: 'typeorm' });
  },
});
