import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { ProblemCode } from '../../lib/index.js';
import { send } from '../fixtures/http-client.js';
import { type PoolApp, startPoolApp } from '../fixtures/pool-app.fixture.js';

/** What an app may register at boot: booleans, float8 and jsonb kept as the server's text. */
const OIDS = [16, 701, 3802];

describe("an app whose own pg type parsers return the server's text", () => {
  let app: PoolApp;
  const originals = OIDS.map((oid) => pg.types.getTypeParser(oid, 'text'));
  beforeAll(async () => {
    for (const oid of OIDS) pg.types.setTypeParser(oid, (text: string) => text);
    app = await startPoolApp('app_type_parsers', 8, { cleanup: { enabled: false } });
  });
  afterAll(async () => {
    await app?.stop();
    OIDS.forEach((oid, i) => pg.types.setTypeParser(oid, originals[i]));
  });

  const ledger = async (ref: string) =>
    (await app.pool.query('SELECT ref FROM ledger WHERE ref = $1', [ref])).rowCount;

  it.each(['charge', 'tx'])(
    '/%s runs a key once under concurrent duplicates, refuses the others with Retry-After, and replays',
    async (route) => {
      const key = randomUUID();
      const ref = randomUUID();
      const body = { ref, holdMs: 400 };
      const answers = await Promise.all(
        Array.from({ length: 6 }, () => send(app.url, `/${route}`, { key, body })),
      );
      expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
      for (const refused of answers.filter((a) => a.status === 409)) {
        expect(refused.json().code).toBe(ProblemCode.InProgress);
        expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      }
      const first = answers.find((a) => a.status === 201)!;
      const again = await send(app.url, `/${route}`, { key, body });
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body.equals(first.body)).toBe(true);
      if (route === 'tx') expect(await ledger(ref)).toBe(1);
      else {
        // The handler counts its runs: the next key's run is the one after this key's only run.
        const next = await send(app.url, '/charge', { key: randomUUID(), body: { ref } });
        expect(next.json().run).toBe(first.json().run + 1);
      }
    },
  );

  it("refuses a key reused for another request, and audits the refusal with the record's expiry", async () => {
    const key = randomUUID();
    expect((await send(app.url, '/charge', { key, body: { ref: randomUUID() } })).status).toBe(201);
    const other = await send(app.url, '/charge', { key, body: { ref: randomUUID() } });
    expect(other.status).toBe(409);
    expect(other.json().code).toBe(ProblemCode.Mismatch);
    const audited = async () =>
      (
        await app.pool.query(
          `SELECT r.expires_at = date_trunc('milliseconds', k.expires_at) AS same_expiry
             FROM idempotency_keys_refusals r JOIN idempotency_keys k ON k.id = r.record_id
            WHERE k.idempotency_key = $1 AND r.kind = 'mismatch'`,
          [key],
        )
      ).rows;
    const deadline = Date.now() + 10_000;
    let rows = await audited();
    while (rows.length === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      rows = await audited();
    }
    // The app's boolean parser applies to this, the test's own query.
    expect(rows).toEqual([{ same_expiry: 't' }]);
  });
});
