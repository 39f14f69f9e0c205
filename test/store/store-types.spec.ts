import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { queryWithin } from '../../lib/store/postgres/pg-deadline.js';
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
});
