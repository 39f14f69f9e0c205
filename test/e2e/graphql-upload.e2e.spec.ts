/**
 * A GraphQL mutation taking a file through the `Upload` scalar (graphql-upload: its `parseValue`
 * gives the resolver a Promise of the file). The Promise is awaited and what it resolves to is
 * hashed (file name, MIME type, encoding). Before, fa338e6 refused every keyed call with 500, and
 * before that the Promise hashed as {}. The scalar below is graphql-upload's, with the multipart
 * transport replaced by a JSON variable.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type INestApplication } from '@nestjs/common';
import { Args, Mutation, Query, Resolver } from '@nestjs/graphql';
import { GraphQLScalarType } from 'graphql';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { Idempotent } from '../../lib/index.js';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';
import { GRAPHQL_APP_START_MS, startGraphqlApp } from '../fixtures/graphql-app.js';

interface FileUpload {
  filename: string;
  mimetype: string;
  encoding: string;
  createReadStream(): Readable;
}

// graphql-upload's GraphQLUpload: parseValue(value) { return value.promise } (an Upload instance).
const Upload = new GraphQLScalarType({
  name: 'Upload',
  parseValue(value: unknown) {
    const v = value as { filename: string; content: string };
    return Promise.resolve<FileUpload>({
      filename: v.filename,
      mimetype: 'text/plain',
      encoding: '7bit',
      createReadStream: () => Readable.from([Buffer.from(v.content)]),
    });
  },
  serialize() {
    throw new Error('Upload serialization unsupported.');
  },
});

const typeDefs = `
  scalar Upload
  type Document { id: ID!, bytes: Int!, run: Int! }
  type Query { ping: String! }
  type Mutation { uploadDocument(file: Upload!, title: String!): Document! }
`;

let runs = 0;

@Resolver()
class DocumentsResolver {
  @Query('ping')
  ping() {
    return 'pong';
  }

  @Mutation('uploadDocument')
  @Idempotent()
  async uploadDocument(@Args('file') file: Promise<FileUpload>, @Args('title') title: string) {
    const { createReadStream } = await file;
    let bytes = 0;
    for await (const chunk of createReadStream()) bytes += (chunk as Buffer).length;
    runs++;
    return { id: `doc_${title}_${runs}`, bytes, run: runs };
  }
}

describe('GraphQL mutation with an Upload argument and an Idempotency-Key', () => {
  let db: MigratedDatabase;
  let app: INestApplication;
  let url: string;

  const upload = async (key: string, content: string, filename = 'invoice.pdf') => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({
        query:
          'mutation($f: Upload!) { d: uploadDocument(file: $f, title: "invoice") { id bytes run } }',
        variables: { f: { filename, content } },
      }),
    });
    return (await res.json()) as {
      data?: { d: { id: string; bytes: number; run: number } } | null;
      errors?: { message: string; extensions: Record<string, unknown> }[];
    };
  };

  beforeAll(async () => {
    db = await createMigratedDatabase('e12gqlup');
    ({ app, url } = await startGraphqlApp({
      db,
      typeDefs,
      providers: [DocumentsResolver],
      graphql: { resolvers: { Upload } },
    }));
  }, GRAPHQL_APP_START_MS);
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('runs the upload once and replays it to a retry (was: 500 idempotency_misconfigured on every call)', async () => {
    const key = randomUUID();
    const first = await upload(key, 'hello world');
    expect(first.errors?.map((e) => [e.extensions.code, e.message])).toBeUndefined();
    expect(first.data?.d).toMatchObject({ bytes: 11, run: 1 });
    const retry = await upload(key, 'hello world');
    expect(retry.data?.d).toEqual(first.data?.d);
    expect(runs).toBe(1);
    // Another file sent with the key is another request: refused, never answered with the first.
    const other = await upload(key, 'another document', 'receipt.pdf');
    expect(other.data?.d).toBeUndefined();
    expect(other.errors?.[0].extensions).toMatchObject({
      code: 'idempotency_key_reused_with_different_params',
    });
    expect(runs).toBe(1);
  });
});
