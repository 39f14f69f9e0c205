/**
 * The single-commit completion (record INSERT + COMMIT, pipelined under one deadline timer): the
 * database stops answering as the handler returns, a record INSERT blocked server-side, and
 * at.app.close() while a claim pipeline hangs. The client gets an answer within about
 * statementTimeoutMs, a retry never runs the handler a second time once its writes committed, and
 * the app closes. (helper-87's attack on the shared pipeline deadline.)
 */
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import { send } from '../fixtures/http-client.js';
import { ledgerApp, ledgerAppSuite, ledgerRows, retryPast409 } from '../fixtures/ledger-app.js';

const T = 800;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ledger = ledgerApp(T);
const { runs, hooks } = ledger;

describe('single-commit completion pipeline: a hung or blocked database', () => {
  const at = ledgerAppSuite('single_commit_completion', ledger, { proxied: true });
  const rows = (ref: string) => ledgerRows(at.db, ref);

  it('blackholed as the handler returns: an answer within about statementTimeoutMs; after recovery the writes are in the ledger at most once and a retry never runs the handler twice', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    hooks.beforeReturn = () => at.proxy.blackhole();
    const started = Date.now();
    const res = await send(at.app.url, '/pay', { key, body: { ref } });
    const ms = Date.now() - started;
    hooks.beforeReturn = undefined;
    expect(res.status).toBe(503);
    expect(ms).toBeLessThan(T + 1_500);
    at.proxy.resume();
    await sleep(500);
    const committed = await rows(ref);
    const retry = await retryPast409(at.app.url, key, { ref });
    expect({
      committed,
      retryStatus: retry.status,
      replayed: retry.headers['idempotent-replayed'] === 'true',
      runs: runs.get(ref),
      ledger: await rows(ref),
    }).toEqual({
      committed: expect.any(Number),
      retryStatus: 201,
      replayed: committed === 1,
      runs: committed ? 1 : 2,
      ledger: 1,
    });
    expect(at.unhandled).toEqual([]);
  });

  it('record INSERT blocked server-side (a writer ignoring the lock holds the same scope uncommitted): 503 outcome unknown within about statementTimeoutMs; then the retry never runs the handler a second time on top of committed writes', async () => {
    const key = randomUUID();
    const ref = randomUUID();
    const other = new pg.Client({ connectionString: at.db.url });
    await other.connect();
    hooks.beforeReturn = () => {
      hooks.beforeReturn = undefined;
      return other.query('BEGIN').then(() =>
        other.query(
          `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, status_code)
           VALUES ($1, 'pay', repeat('0', 64), 'in_progress', NULL)`,
          [key],
        ),
      );
    };
    const started = Date.now();
    let res;
    try {
      res = await send(at.app.url, '/pay', { key, body: { ref } });
    } finally {
      await sleep(50);
      await other.query('ROLLBACK').catch(() => undefined);
      await other.end();
    }
    const ms = Date.now() - started;
    expect({ status: res.status, outcome: res.json().outcome }).toEqual({
      status: 503,
      outcome: 'unknown',
    });
    expect(ms).toBeLessThan(T + 1_500);
    await sleep(500);
    const committed = await rows(ref);
    const retry = await retryPast409(at.app.url, key, { ref });
    expect({
      committed,
      retry: retry.status,
      ledger: await rows(ref),
      runs: runs.get(ref),
    }).toEqual({
      committed: expect.any(Number),
      retry: 201,
      ledger: 1,
      runs: committed ? 1 : 2,
    });
    expect(at.unhandled).toEqual([]);
  });

  it('app.close() while a claim pipeline hangs: the request gets 503 and close returns within a few seconds', async () => {
    const key = randomUUID();
    at.proxy.blackhole();
    const answer = send(at.app.url, '/pay', { key, body: { ref: key } }).catch((e: Error) => e);
    await sleep(100);
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const closed = await Promise.race([
      at.app.close().then(() => 'closed'),
      new Promise((r) => (timer = setTimeout(() => r('still closing'), 10_000))),
    ]);
    clearTimeout(timer);
    const res = await answer;
    expect({ closed, fast: Date.now() - started < T + 3_000 }).toEqual({
      closed: 'closed',
      fast: true,
    });
    expect((res as { status?: number }).status ?? String(res)).toBe(503);
    expect(runs.get(key)).toBeUndefined();
    at.proxy.resume();
    expect(at.unhandled).toEqual([]);
  });
});
