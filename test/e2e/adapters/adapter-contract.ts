/**
 * The contract every transaction adapter meets against real PostgreSQL: the tool's writes run in
 * the transaction the store holds (visible to the tool inside it, to nobody else before COMMIT,
 * gone after ROLLBACK), on that one connection, with an eager or a lazy BEGIN; and the tool's own
 * transaction on the handle never commits the outer one early.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { TransactionClient } from '../../../lib/adapters/transaction-client.js';
import {
  adapterFixture,
  inTransaction,
  lazyClient,
  type AdapterFixture,
} from './adapter-fixture.js';

export interface ToolUnderTest<H> {
  bind(client: TransactionClient): H;
  /** INSERT INTO notes (id, body) through the tool's API. */
  insert(handle: H, id: string): Promise<void>;
  /** SELECT id FROM notes ORDER BY id through the tool's API. */
  ids(handle: H): Promise<string[]>;
  /** Runs `work` in the tool's own transaction API on the handle. */
  nested(handle: H, work: (inner: H) => Promise<void>): Promise<void>;
  /** Runs `work` in the tool's own transaction with an isolation level, where its API takes one. */
  isolated?(handle: H, work: () => Promise<void>): Promise<void>;
}

export function describeAdapterContract<H>(tool: string, t: ToolUnderTest<H>): void {
  describe(`${tool} transaction adapter`, () => {
    let fx: AdapterFixture;
    beforeAll(async () => {
      fx = await adapterFixture(tool);
    });
    afterAll(() => fx.close());

    it('writes inside the transaction and rolls back with it', async () => {
      await inTransaction(fx.pool, 'ROLLBACK', async (client) => {
        const handle = t.bind(client);
        await t.insert(handle, 'rolled-back');
        expect(await t.ids(handle)).toEqual(['rolled-back']);
      });
      expect(await fx.committedIds()).toEqual([]);
    });

    it('commits with the transaction, on the one connection the store holds', async () => {
      await inTransaction(fx.pool, 'COMMIT', async (client) => {
        const handle = t.bind(client);
        await t.insert(handle, 'committed');
        expect(await t.ids(handle)).toEqual(['committed']);
        expect(await fx.committedIds()).toEqual([]);
        expect(await fx.connections()).toBe(1);
        expect(fx.pool.totalCount).toBe(1);
      });
      expect(await fx.committedIds()).toEqual(['committed']);
      await fx.pool.query('DELETE FROM notes');
    });

    it('runs on a lazy client, whose first query begins the transaction', async () => {
      await inTransaction(fx.pool, 'ROLLBACK', async (client) => {
        const lazy = lazyClient(client);
        const handle = t.bind(lazy);
        expect(lazy.begun).toBe(false);
        await t.insert(handle, 'lazy');
        expect(lazy.begun).toBe(true);
        expect(await t.ids(handle)).toEqual(['lazy']);
      });
      expect(await fx.committedIds()).toEqual([]);
    });

    it("makes the tool's own transaction a savepoint, never committing early", async () => {
      await inTransaction(fx.pool, 'ROLLBACK', async (client) => {
        const handle = t.bind(client);
        await t.insert(handle, 'outer');
        await t.nested(handle, (inner) => t.insert(inner, 'kept'));
        const failing = t.nested(handle, async (inner) => {
          await t.insert(inner, 'undone');
          throw new Error('handler failed');
        });
        await expect(failing).rejects.toThrow('handler failed');
        expect(await t.ids(handle)).toEqual(['kept', 'outer']);
        expect(await fx.committedIds()).toEqual([]);
      });
      expect(await fx.committedIds()).toEqual([]);
    });

    const isolated = t.isolated?.bind(t);
    // Only where the tool's nested-transaction API takes an isolation level (Drizzle's does not).
    if (isolated)
      it('refuses an isolation level for a nested transaction, which a savepoint cannot take', async () => {
        await inTransaction(fx.pool, 'ROLLBACK', async (client) => {
          const handle = t.bind(client);
          await expect(isolated(handle, () => t.insert(handle, 'isolated'))).rejects.toThrow(
            /savepoint: it cannot set an isolation level/,
          );
          expect(await t.ids(handle)).toEqual([]);
        });
      });
  });
}
