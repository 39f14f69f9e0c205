import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { StoreTimeoutError, queryWithin } from '../../lib/store/postgres/pg-deadline.js';
import { pipelineWithin } from '../../lib/store/postgres/pg-pipeline.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';
import { TcpProxy } from '../fixtures/tcp-proxy.js';

const MS = 5_000;
const read = {
  name: 'described_once_read',
  text: `SELECT id, note, at, doc, raw, missing FROM described_once WHERE id = $1`,
};
const bound = (id: number) => ({ ...read, values: [id] });

/** A client whose RowDescription messages (pg's Describe answers) are counted. */
async function countingClient(url: string, config: pg.ClientConfig = {}) {
  const client = new pg.Client({ connectionString: url, ...config });
  await client.connect();
  const counted = { client, described: 0 };
  (client as unknown as { connection: pg.Connection }).connection.on('rowDescription', () => {
    counted.described++;
  });
  return counted;
}

describe("the store's named statements are described once per connection", () => {
  let db: TestDatabase;
  let setup: pg.Pool;
  const clients: pg.Client[] = [];
  const open = async (config?: pg.ClientConfig) => {
    const counted = await countingClient(db.url, config);
    clients.push(counted.client);
    return counted;
  };
  beforeAll(async () => {
    db = await createTestDatabase('described_once');
    setup = new pg.Pool({ connectionString: db.url, max: 1 });
    await setup.query(`CREATE TABLE described_once (id int PRIMARY KEY, note text, at timestamptz,
      doc jsonb, raw bytea, missing int)`);
    await setup.query(`INSERT INTO described_once VALUES
      (1, 'first', '2026-12-04T10:00:00Z', '{"a":[1,2]}', '\\x0102', NULL),
      (2, NULL, '2026-12-04T11:30:00.5Z', '"s"', '\\x', 7)`);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.end().catch(() => undefined)));
  });
  afterAll(async () => {
    await setup?.end();
    await db?.drop();
  });

  it('parses every later execution as pg parses a described one, without asking again', async () => {
    const { client } = await open();
    const plain = await client.query({ text: read.text, values: [1] });
    const counted = await open();
    const first = await queryWithin(counted.client, bound(1), MS);
    const again = await queryWithin(counted.client, bound(1), MS);
    const other = await queryWithin(counted.client, bound(2), MS);
    const none = await queryWithin(counted.client, bound(3), MS);
    expect(counted.described).toBe(1);
    expect(again.rows).toEqual(plain.rows);
    expect(first.rows).toEqual(plain.rows);
    expect(again.rows[0].at).toBeInstanceOf(Date);
    expect(again.rows[0].raw).toEqual(Buffer.from([1, 2]));
    expect(other.rows).toEqual([
      {
        id: 2,
        note: null,
        at: new Date('2026-12-04T11:30:00.5Z'),
        doc: 's',
        raw: Buffer.alloc(0),
        missing: 7,
      },
    ]);
    expect(none.rows).toEqual([]);
    expect(none.rowCount).toBe(0);
  });

  it("parses with the store's parsers, not a client's, on a binary client too, and works pipelined", async () => {
    const tagged = await open({
      types: { getTypeParser: () => (value: string | Buffer) => `tag:${String(value)}` },
    } as pg.ClientConfig);
    const binary = await open({ binary: true } as pg.ClientConfig);
    for (let i = 0; i < 2; i++) {
      expect((await queryWithin(tagged.client, bound(2), MS)).rows[0].missing).toBe(7);
      expect((await queryWithin(binary.client, bound(2), MS)).rows[0].missing).toBe(7);
    }
    expect([tagged.described, binary.described]).toEqual([1, 1]);

    const settled = await pipelineWithin(binary.client, [bound(1), bound(2), bound(1)], MS);
    expect(settled.map((s) => s.status === 'fulfilled' && s.value.rows[0].id)).toEqual([1, 2, 1]);
    expect(binary.described).toBe(1);
  });

  it("keeps the store's parsers for the types it reads, and pg's for the others, looked up each time", async () => {
    const { client } = await open();
    expect((await queryWithin(client, bound(2), MS)).rows[0].missing).toBe(7);
    const [int4, timestamptz] = [23, 1184].map((oid) => pg.types.getTypeParser(oid, 'text'));
    client.setTypeParser(23, (value: string) => `late:${value}`);
    pg.types.setTypeParser(23, (value: string) => `late:${value}`);
    pg.types.setTypeParser(1184, (value: string) => `late:${value}`);
    try {
      const again = await queryWithin(client, bound(2), MS);
      expect(again.rows[0]).toMatchObject({ id: 2, missing: 7, note: null, doc: 's' });
      expect(again.rows[0].at).toMatch(/^late:2026-12-04 11:30:00.5\+00$/);
    } finally {
      pg.types.setTypeParser(23, int4);
      pg.types.setTypeParser(1184, timestamptz);
    }
  });

  it("leaves a client whose query was replaced to pg's own path (its wrapper gets a promise)", async () => {
    const { client } = await open();
    const original = client.query.bind(client) as (config: unknown) => Promise<pg.QueryResult>;
    const seen: string[] = [];
    Object.assign(client, {
      query: (config: { text: string }) =>
        original(config).then((result) => {
          seen.push(config.text);
          return result;
        }),
    });
    for (let i = 0; i < 2; i++) {
      expect((await queryWithin(client, bound(1), MS)).rows[0].note).toBe('first');
    }
    expect(seen).toEqual([read.text, read.text]);
  });

  it('fails as pg does when the statement no longer returns the same columns', async () => {
    await setup.query(`CREATE TABLE described_shape (id int PRIMARY KEY, a int)`);
    await setup.query(`INSERT INTO described_shape VALUES (1, 5)`);
    const star = {
      name: 'described_once_star',
      text: 'SELECT * FROM described_shape WHERE id = $1',
    };
    const { client } = await open();
    expect((await queryWithin(client, { ...star, values: [1] }, MS)).rows).toEqual([
      { id: 1, a: 5 },
    ]);
    await setup.query(`ALTER TABLE described_shape ADD COLUMN b int DEFAULT 9`);
    await expect(queryWithin(client, { ...star, values: [1] }, MS)).rejects.toThrow(
      /cached plan must not change result type/,
    );
  });

  it('still gives up on a hung execution within the deadline', async () => {
    const proxy = TcpProxy.forUrl(db.url);
    await proxy.start();
    try {
      const { client } = await countingClient(proxy.wrap(db.url));
      client.on('error', () => undefined);
      await queryWithin(client, bound(1), MS);
      proxy.blackhole();
      await expect(queryWithin(client, bound(1), 200)).rejects.toThrow(StoreTimeoutError);
    } finally {
      proxy.resume();
      await proxy.stop();
    }
  });
});
