import pg from 'pg';

export type Parse = (text: string) => unknown;
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
export const PARSERS: ReadonlyMap<number, Parse> = new Map<number, Parse>([
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
