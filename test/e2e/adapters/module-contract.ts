/**
 * The contract every transaction adapter meets inside a real Nest app on
 * `IdempotencyModule.forRoot({ pool, transactions })`, in both transactional modes: the
 * handler's write through the tool's own API commits with the completed record, and a replay
 * writes nothing more; a handler that throws leaves no write and a free key; and in `'single'`
 * mode the request costs the round trips it costs with plain pg (three: BEGIN + lock + lookup,
 * the handler's statement, the record + COMMIT); in the default mode, the same 5 statements.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { TransactionAdapterLike } from '../../../lib/index.js';
import { send } from '../../fixtures/http-client.js';
import { startModuleApp, type ModuleApp } from './module-fixture.js';

export interface ToolInModule<M> {
  transactions: () => TransactionAdapterLike<M>;
  /** INSERT INTO notes (id, body) through the tool's API: one statement. */
  insert(manager: M, id: string): Promise<void>;
}

const NOTE_INSERT = /^insert into ("public"\.)?"?notes"?/i;

export function describeModuleContract<M>(tool: string, t: ToolInModule<M>): void {
  describe(`${tool} in forRoot({ pool, transactions })`, () => {
    let app: ModuleApp;
    beforeAll(async () => {
      app = await startModuleApp(tool, t.transactions(), (manager: M, id) => t.insert(manager, id));
    });
    afterAll(() => app?.stop());
    beforeEach(() => {
      app.sent.length = 0;
      app.pipelined.length = 0;
    });

    const notes = async (id: string) =>
      (await app.pool.query('SELECT 1 FROM notes WHERE id = $1', [id])).rowCount;
    const record = async (key: string) =>
      (
        await app.pool.query('SELECT status FROM idempotency_keys WHERE idempotency_key = $1', [
          key,
        ])
      ).rows[0] as { status: string } | undefined;

    describe.each(['tx', 'single'])('/%s', (route) => {
      it("commits the handler's write with the record; a replay writes nothing more", async () => {
        const key = randomUUID();
        const id = randomUUID();
        const first = await send(app.url, `/${route}`, { key, body: { id } });
        expect(first.status).toBe(201);
        expect(await notes(id)).toBe(1);
        expect(await record(key)).toEqual({ status: 'completed' });
        const runs = app.runs();
        app.sent.length = 0;
        const again = await send(app.url, `/${route}`, { key, body: { id } });
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.status).toBe(201);
        expect(again.body.equals(first.body)).toBe(true);
        expect(app.runs()).toBe(runs);
        expect(app.sent.filter((s) => NOTE_INSERT.test(s))).toEqual([]);
        expect(await notes(id)).toBe(1);
      });

      it('rolls the write back when the handler throws, and the key is free', async () => {
        const key = randomUUID();
        const id = randomUUID();
        const failed = await send(app.url, `/${route}`, { key, body: { id, then: 'throw' } });
        expect(failed.status).toBe(500);
        expect(app.sent.filter((s) => NOTE_INSERT.test(s))).toHaveLength(1);
        expect(await notes(id)).toBe(0);
        expect(await record(key)).toBeUndefined();
        const retry = await send(app.url, `/${route}`, { key, body: { id } });
        expect(retry.status).toBe(201);
        expect(await notes(id)).toBe(1);
        expect(await record(key)).toEqual({ status: 'completed' });
      });
    });

    it('/tx costs what plain pg costs: 6 statements, the tool adding none', async () => {
      const first = await send(app.url, '/tx', { key: randomUUID(), body: { id: randomUUID() } });
      expect(first.status).toBe(201);
      const { sent } = app;
      expect(sent).toHaveLength(6);
      expect(sent[0]).toMatch(/^WITH lock AS \(SELECT pg_try_advisory_xact_lock/);
      expect(sent[1]).toBe('BEGIN');
      // The claim row, locked in the transaction: it holds the claim instead of renewals.
      expect(sent[2]).toMatch(/^SELECT id FROM "idempotency_keys" WHERE .* FOR UPDATE$/s);
      expect(sent[3]).toMatch(NOTE_INSERT);
      expect(sent[4]).toMatch(/^UPDATE "idempotency_keys"\s+SET status = 'completed'/);
      expect(sent[5]).toBe('COMMIT');
    });

    it("'single' costs what plain pg costs: 6 statements in 3 round trips", async () => {
      const first = await send(app.url, '/single', {
        key: randomUUID(),
        body: { id: randomUUID() },
      });
      expect(first.status).toBe(201);
      const { sent, pipelined } = app;
      expect(sent).toHaveLength(6);
      expect(sent[0]).toBe('BEGIN');
      expect(sent[1]).toMatch(/^SELECT pg_try_advisory_xact_lock\(\$1\) AS locked/);
      expect(sent[2]).toMatch(/^SELECT k\.id, /);
      expect(sent[3]).toMatch(NOTE_INSERT);
      expect(sent[4]).toMatch(/^INSERT INTO .*'completed'.*RETURNING/s);
      expect(sent[5]).toBe('COMMIT');
      // BEGIN + lock + lookup in one round trip, the handler's INSERT, the record + COMMIT.
      expect(pipelined).toEqual([0, 1, 2, 4, 5]);
    });
  });
}
