import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { queryWithin } from '../../lib/store/postgres/pg-deadline.js';
import { ForeignParserError } from '../../lib/store/postgres/foreign-parsers.check.js';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';

const MS = 5_000;

describe("the store's own type parsers", () => {
  let db: TestDatabase;
  let client: pg.Client;
  beforeAll(async () => {
    db = await createTestDatabase('store_types');
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await db?.drop();
  });

  const read = (value: Buffer) =>
    queryWithin(client, { text: 'SELECT $1::bytea AS b', values: [value] }, MS);

  it.each(['hex', 'escape'])(
    'reads bytea as PostgreSQL writes it with bytea_output = %s',
    async (output) => {
      await client.query(`SET bytea_output = ${output}`);
      const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const samples = [Buffer.alloc(0), Buffer.from('\\\\x41\\'), every, randomBytes(4096)];
      for (const sample of samples) {
        const { rows } = await read(sample);
        expect(Buffer.compare(rows[0].b as Buffer, sample)).toBe(0);
      }
      const raw = await client.query({ text: 'SELECT $1::bytea::text AS t', values: [every] });
      expect((raw.rows[0].t as string).startsWith('\\x')).toBe(output === 'hex');
    },
  );

  it("reads booleans, numbers, json and text with pg's parsers whatever the app registered", async () => {
    const oids = [16, 21, 23, 701, 3802];
    const originals = oids.map((oid) => pg.types.getTypeParser(oid, 'text'));
    for (const oid of oids) pg.types.setTypeParser(oid, (text: string) => `app:${text}`);
    try {
      const { rows } = await queryWithin(
        client,
        {
          text: `SELECT false AS f, true AS t, 2::int2 AS s, -7 AS i, 0.5::float8 AS d,
                        '{"a":[1]}'::jsonb AS j, 'x'::text AS x, NULL::bool AS n`,
          values: [],
        },
        MS,
      );
      expect(rows[0]).toEqual({
        f: false,
        t: true,
        s: 2,
        i: -7,
        d: 0.5,
        j: { a: [1] },
        x: 'x',
        n: null,
      });
    } finally {
      oids.forEach((oid, i) => pg.types.setTypeParser(oid, originals[i]));
    }
  });

  it('reads text results on a binary client, whatever binary parsers the app registered', async () => {
    const binary = new pg.Client({ connectionString: db.url, binary: true } as pg.ClientConfig);
    await binary.connect();
    const originals = [16, 23].map((oid) => pg.types.getTypeParser(oid, 'binary'));
    pg.types.setTypeParser(16, 'binary', () => 'app');
    pg.types.setTypeParser(23, 'binary', () => 'app');
    try {
      const statement = {
        name: 'store_types_binary',
        text: 'SELECT $1::int AS i, false AS f, true AS t',
        values: [5],
      };
      for (let i = 0; i < 2; i++) {
        expect((await queryWithin(binary, statement, MS)).rows).toEqual([
          { i: 5, f: false, t: true },
        ]);
      }
    } finally {
      [16, 23].forEach((oid, i) => pg.types.setTypeParser(oid, 'binary', originals[i]));
      await binary.end();
    }
  });

  describe('a client that keeps its own parsers whatever a statement asks (as pg-native does)', () => {
    /** Its own parsers, looked up on each query as pg-native does; `own` may change later. */
    const fixedTypes = (bool: (text: string) => unknown) => {
      const own = new Map<number, unknown>([[16, bool]]);
      return {
        own,
        getTypeParser: (oid: number, format: string) =>
          (format === 'text' && own.get(oid)) || pg.types.getTypeParser(oid, format as 'text'),
      };
    };
    /** A pg client behind pg-native's surface: no `connection`, its own `types` on every query. */
    const nativeLike = async (types: ReturnType<typeof fixedTypes>) => {
      const inner = new pg.Client({ connectionString: db.url });
      await inner.connect();
      const client = {
        query: (config: { name?: string; text: string; values: unknown[] }) =>
          inner.query({
            name: config.name,
            text: config.text,
            values: config.values,
            types,
          } as pg.QueryConfig),
        getTypeParser: types.getTypeParser,
        end: () => inner.end(),
      };
      return client;
    };
    beforeAll(async () => {
      await client.query('CREATE TABLE store_types_sent (n int)');
    });
    const insert = {
      text: 'INSERT INTO store_types_sent VALUES (1) RETURNING true AS claimed',
      values: [],
    };
    const sent = async () =>
      (await client.query('SELECT count(*)::int AS n FROM store_types_sent')).rows[0].n;

    it('refuses to send a statement when it would misread a type the store reads', async () => {
      const tagged = await nativeLike(fixedTypes((text) => text));
      try {
        await expect(queryWithin(tagged, insert, MS)).rejects.toThrow(ForeignParserError);
        await expect(queryWithin(tagged, insert, MS)).rejects.toThrow(
          /parses oid 16 otherwise than pg/,
        );
        expect(await sent()).toBe(0);
      } finally {
        await tagged.end();
      }
    });

    it("runs the store's statements when its parsers are pg's (int8 as a number too), and refuses once one changes", async () => {
      const types = fixedTypes((text) => text === 't');
      types.own.set(20, (text: string) => parseInt(text, 10));
      const plain = await nativeLike(types);
      try {
        expect((await queryWithin(plain, insert, MS)).rows).toEqual([{ claimed: true }]);
        expect(await sent()).toBe(1);
        types.own.set(16, (text: string) => text);
        await expect(queryWithin(plain, insert, MS)).rejects.toThrow(/parses oid 16/);
        expect(await sent()).toBe(1);
        types.own.set(16, (text: string) => text === 't');
        expect((await queryWithin(plain, insert, MS)).rows).toEqual([{ claimed: true }]);
        expect(await sent()).toBe(2);
      } finally {
        await plain.end();
      }
    });

    it('refuses a binary pg client the store cannot ask for text results (its query replaced)', async () => {
      const binary = new pg.Client({ connectionString: db.url, binary: true } as pg.ClientConfig);
      await binary.connect();
      const original = binary.query.bind(binary) as (config: unknown) => Promise<pg.QueryResult>;
      Object.assign(binary, { query: (config: unknown) => original(config) });
      try {
        await expect(queryWithin(binary, insert, MS)).rejects.toThrow(/binary results/);
        expect(await sent()).toBe(2);
      } finally {
        await binary.end();
      }
    });
  });
});
