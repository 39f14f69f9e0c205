/**
 * The completion write fails after a successful handler (non-transactional mode): PostgreSQL is
 * cut off (TcpProxy) while the handler runs and comes back after it returned. README, "Limits and
 * choices": the client still gets its response, the claim is not deleted, retries get
 * `409 request_in_progress` until the lease ends, then the operation may run again (once).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { send, type RawResponse } from '../fixtures/http-client.js';
import { startFixtureApp, type FixtureApp } from '../fixtures/payments.fixture.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';
import { sleep, waitFor } from './support.js';

const LEASE_SECONDS = 2;
/** Long enough that the fault is in place well before the handler returns, even on a busy box. */
const HANDLER_MS = 1_000;

describe('completion write fails after a successful handler (PostgreSQL cut off mid-request)', () => {
  let db: MigratedDatabase;
  let proxy: TcpProxy;
  let f: FixtureApp;
  let appDataSource: DataSource | undefined;

  beforeAll(async () => {
    db = await createMigratedDatabase('rel_completion');
    proxy = TcpProxy.forUrl(db.url);
    await proxy.start();
    // The app reaches PostgreSQL only through the proxy; the spec's own assertions go direct.
    appDataSource = new DataSource({
      type: 'postgres',
      url: proxy.wrap(db.url),
      connectTimeoutMS: 1000,
      poolErrorHandler: () => undefined,
    });
    f = await startFixtureApp({
      platform: 'express',
      dataSource: appDataSource,
      options: { leaseSeconds: LEASE_SECONDS },
    });
  }, 30_000);
  afterAll(async () => {
    await f?.close(); // closes the DataSource the module opened
    if (appDataSource?.isInitialized) await appDataSource.destroy(); // if start-up failed midway
    await proxy?.stop();
    await db?.drop();
  }, 30_000);

  const sql = async (text: string, params: unknown[] = []) => db.dataSource.query(text, params);
  const leaseRemainingMs = async (key: string): Promise<number> => {
    const [row] = await sql(
      `SELECT (extract(epoch FROM locked_until - now()) * 1000)::float8 AS ms
         FROM idempotency_keys WHERE idempotency_key = $1`,
      [key],
    );
    return row.ms as number;
  };

  /** The first response, and the claim row as the handler started. */
  interface Failed {
    key: string;
    body: { ms: number; key: string };
    response: RawResponse;
    claimed: Record<string, any>;
  }

  /**
   * What README "Limits and choices" promises once the completion write failed: the client got
   * the handler's response intact; the claim is not deleted; retries get 409 exactly while the
   * lease holds; then one retry takes it over, runs once more and completes; then replays.
   */
  async function expectDocumentedOutcome({
    key,
    body,
    response,
    claimed,
  }: Failed): Promise<string> {
    // The client still gets the handler's response, intact.
    expect(response.status).toBe(201);
    expect(response.headers['idempotent-replayed']).toBeUndefined();
    expect(response.headers['content-length']).toBe(String(response.body.length));
    expect(response.json()).toEqual({ done: expect.any(Number) });
    expect(f.exec.count('slow', key)).toBe(1);

    // The claim is not deleted: same record, same owner, still in progress, nothing stored.
    const [kept] = await db.records('idempotency_key = $1', [key]);
    expect(kept).toMatchObject({
      id: claimed.id,
      owner_token: claimed.owner_token,
      status: 'in_progress',
      status_code: null,
      response_raw: null,
      completed_at: null,
    });

    // Retries: 409 request_in_progress (with Retry-After, handler not run) exactly while the
    // lease holds; the first retry after it takes the claim over and runs the handler once more.
    // The lease is read from the database (its clock decides) just before each retry.
    let conflicts = 0;
    let takeover: RawResponse | undefined;
    const deadline = Date.now() + 10_000;
    while (!takeover && Date.now() < deadline) {
      const checkedAt = performance.now();
      const remainingMs = await leaseRemainingMs(key);
      const retry = await send(f.url, '/slow', { key, body });
      const elapsedMs = performance.now() - checkedAt;
      if (retry.status === 409) {
        expect(retry.headers['retry-after']).toBe('2');
        expect(retry.json()).toMatchObject({ status: 409, code: 'request_in_progress' });
        // A 409 only while the lease held: the claim ran after the check, so time was left.
        expect(remainingMs).toBeGreaterThan(0);
        expect(f.exec.count('slow', key)).toBe(1);
        conflicts++;
        await sleep(150);
      } else {
        // A takeover only once the lease ended: by the claim, at most `elapsedMs` after the check.
        expect(remainingMs).toBeLessThan(elapsedMs + 5);
        takeover = retry;
      }
    }
    expect(conflicts).toBeGreaterThanOrEqual(1);
    expect(takeover).toBeDefined();
    expect(takeover!.status).toBe(201);
    expect(takeover!.headers['idempotent-replayed']).toBeUndefined();
    expect(f.exec.count('slow', key)).toBe(2);
    const [completed] = await db.records('idempotency_key = $1', [key]);
    expect(completed).toMatchObject({ status: 'completed', status_code: 201 });
    expect(completed.response_raw.equals(takeover!.body)).toBe(true);
    // The abandoned claim was archived on takeover.
    const archived = await sql(
      `SELECT id, status FROM idempotency_keys_archive WHERE idempotency_key = $1`,
      [key],
    );
    expect(archived).toEqual([{ id: claimed.id, status: 'in_progress' }]);

    // And from then on it replays, never a third run.
    const replay = await send(f.url, '/slow', { key, body });
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(takeover!.body)).toBe(true);
    expect(f.exec.count('slow', key)).toBe(2);
    return (
      `first answer 201 ${response.text}; ${conflicts} retries got 409 while the lease held;` +
      ` takeover 201 ${takeover!.text}; executions ${f.exec.count('slow', key)}; replay 201 same bytes`
    );
  }

  /** Sends the first request and waits until its handler runs. */
  async function startFirst() {
    const key = randomUUID();
    const body = { ms: HANDLER_MS, key };
    const response = send(f.url, '/slow', { key, body });
    await waitFor('the handler to start', async () => f.exec.count('slow', key) === 1, 5_000, 5);
    return { key, body, response };
  }
  /** The claim row (read directly, not through the proxy), while the handler still runs. */
  async function claimOf(key: string) {
    const [claimed] = await db.records('idempotency_key = $1', [key]);
    expect(claimed).toMatchObject({ status: 'in_progress', completed_at: null });
    return claimed;
  }

  it('connection dropped while the handler runs: 201 intact, claim kept (409) until the lease ends, then one more run', async () => {
    const first = await startFirst();
    // PostgreSQL goes away while the handler runs; comes back once the client has its answer.
    const cutAt = performance.now();
    await proxy.cut();
    const claimed = await claimOf(first.key);
    const response = await first.response;
    const answeredAfterMs = performance.now() - cutAt;
    await proxy.restore();

    const outcome = await expectDocumentedOutcome({ ...first, claimed, response });
    console.log(
      `[completion-failure] proxy cut, lease ${LEASE_SECONDS} s, handler ${HANDLER_MS} ms: answered ${answeredAfterMs.toFixed(0)} ms after the cut; ${outcome}`,
    );
  }, 60_000);

  it('completion refused with the database still reachable: the library still does not delete the claim', async () => {
    // Above, a release could not have reached the database anyway. Here only the completion
    // UPDATE of this one claim fails (a test trigger), and everything else works: a library that
    // deleted the claim on failure would be caught, because its DELETE would succeed.
    await sql(
      `CREATE TABLE IF NOT EXISTS reliability_refused_completions (owner_token uuid PRIMARY KEY)`,
    );
    await sql(`CREATE OR REPLACE FUNCTION reliability_refuse_completion() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.status = 'completed' AND EXISTS (
             SELECT 1 FROM reliability_refused_completions r WHERE r.owner_token = OLD.owner_token) THEN
          RAISE EXCEPTION 'reliability test: completion write refused';
        END IF;
        RETURN NEW;
      END $$`);
    await sql(`CREATE OR REPLACE TRIGGER reliability_refuse_completion BEFORE UPDATE ON idempotency_keys
      FOR EACH ROW EXECUTE FUNCTION reliability_refuse_completion()`);

    const first = await startFirst();
    const claimed = await claimOf(first.key);
    await sql(`INSERT INTO reliability_refused_completions VALUES ($1)`, [claimed.owner_token]);
    const response = await first.response;

    const outcome = await expectDocumentedOutcome({ ...first, claimed, response });
    console.log(
      `[completion-failure] completion UPDATE refused (DB reachable), lease ${LEASE_SECONDS} s: ${outcome}`,
    );
  }, 60_000);
});
