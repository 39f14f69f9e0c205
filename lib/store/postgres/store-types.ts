import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';

type Parse = (text: string) => unknown;
/** pg's `types` option: where a result's parser for each column type comes from. */
export interface TypeSource {
  getTypeParser(oid: number, format: string): unknown;
}

const asText: Parse = (text) => text;
const asInt: Parse = (text) => parseInt(text, 10);

/** `bytea` in either output format (`bytea_output = hex`, the default, or `escape`). */
export function parseBytea(text: string): Buffer {
  if (text.startsWith('\\x')) return Buffer.from(text.slice(2), 'hex');
  const bytes: number[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] !== '\\') {
      bytes.push(text.charCodeAt(i));
      i += 1;
    } else if (text[i + 1] === '\\') {
      bytes.push(0x5c);
      i += 2;
    } else {
      bytes.push(parseInt(text.slice(i + 1, i + 4), 8));
      i += 4;
    }
  }
  return Buffer.from(bytes);
}

/**
 * pg's own text parsers for every column type the store reads, by oid. The app's parsers
 * (`pg.types.setTypeParser`, a client's `types`) never apply to them: a boolean parsed as 'f'
 * would read as a claim granted, a float8 kept as a string as an invalid expiry.
 */
const PARSERS = new Map<number, Parse>([
  [16, (text) => text === 't'],
  [17, parseBytea],
  [19, asText],
  [20, asText],
  [21, asInt],
  [23, asInt],
  [25, asText],
  [26, asInt],
  [114, JSON.parse],
  [700, parseFloat],
  [701, parseFloat],
  [1042, asText],
  [1043, asText],
  [2950, asText],
  [3802, JSON.parse],
]);

/**
 * The `types` of every statement the store sends. A type the store does not read, or a binary
 * result, is parsed as pg would parse it.
 */
export const STORE_TYPES: TypeSource = {
  getTypeParser(oid: number, format: string): unknown {
    return (format === 'text' && PARSERS.get(oid)) || pg.types.getTypeParser(oid, format as 'text');
  },
};

/** What pg's parser gives for one sample of each type the store reads: the check below. */
const SAMPLES: [oid: number, text: string][] = [
  [16, 't'],
  [16, 'f'],
  [17, '\\x00ff'],
  [20, '9007199254740993'],
  [21, '-7'],
  [23, '7'],
  [25, 'x'],
  [114, '{"a":[1]}'],
  [701, '0.5'],
  [1043, 'x'],
  [2950, '00000000-0000-0000-0000-000000000001'],
  [3802, '{"a":[1]}'],
];
const checked = new WeakMap<object, string | null>();

/**
 * For a client that parses with its own types whatever a statement asks (pg-native: its parsers
 * are fixed when it is built), the first type the store reads that it parses otherwise than pg
 * does, by oid; null when none. A client that takes each statement's `types` (pg's JavaScript
 * client) or has no `getTypeParser` (another driver) is not checked. Checked once per client.
 */
export function foreignParser(client: object): string | null {
  const known = checked.get(client);
  if (known !== undefined) return known;
  const source = client as Partial<TypeSource> & { connection?: unknown };
  let found: string | null = null;
  if (typeof source.getTypeParser === 'function' && source.connection === undefined) {
    for (const [oid, text] of SAMPLES) {
      const theirs = source.getTypeParser(oid, 'text') as Parse;
      const ours = PARSERS.get(oid) as Parse;
      let same: boolean;
      try {
        same = isDeepStrictEqual(theirs(text), ours(text));
      } catch {
        same = false;
      }
      if (!same) {
        found = `oid ${oid}`;
        break;
      }
    }
  }
  checked.set(client, found);
  return found;
}

/** A statement refused on a client that would misread the store's rows (see `foreignParser`). */
export class ForeignParserError extends Error {
  constructor(type: string) {
    super(
      `nestjs-pg-idempotency: this client parses ${type} otherwise than pg does and cannot take the store's own parsers per statement (pg-native fixes them when the client is built), so the store would misread its records; the statement was not sent. Give the store a pool of pg's JavaScript client, or leave pg's parsers in place on this one.`,
    );
  }
}
