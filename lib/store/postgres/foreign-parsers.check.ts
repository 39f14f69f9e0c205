import { isDeepStrictEqual } from 'node:util';
import { PARSERS, type Parse, type TypeSource } from './store-types.js';

/**
 * One sample of each type the store reads whose value a misparse would change. Not int8: the
 * store only sends its one int8 (`xact_started`) back as a parameter, which pg's documented
 * `defaults.parseInt8` (a number) or a BigInt parser leaves intact.
 */
const SAMPLES: [oid: number, text: string][] = [
  [16, 't'],
  [16, 'f'],
  [17, '\\x00ff'],
  [21, '-7'],
  [23, '7'],
  [25, 'x'],
  [114, '{"a":[1]}'],
  [701, '0.5'],
  [1043, 'x'],
  [2950, '00000000-0000-0000-0000-000000000001'],
  [3802, '{"a":[1]}'],
];

/** Per client, the parsers last checked and what the check found. */
const checked = new WeakMap<object, { parsers: unknown[]; found: string | null }>();

function firstMisread(parsers: unknown[]): string | null {
  for (let i = 0; i < SAMPLES.length; i++) {
    const [oid, text] = SAMPLES[i];
    let same: boolean;
    try {
      same = isDeepStrictEqual((parsers[i] as Parse)(text), (PARSERS.get(oid) as Parse)(text));
    } catch {
      same = false;
    }
    if (!same) return `parses oid ${oid} otherwise than pg does`;
  }
  return null;
}

/**
 * Why a client that does not take the store's query class (see `submitDescribedOnce`) would
 * misread the store's rows, or null. A `binary: true` pg client there (another copy of pg, or
 * one whose `query` was replaced) sends binary results pg's text parsers cannot read. A client
 * that keeps its own parsers whatever a statement asks (pg-native: no pg `connection`, and
 * `getTypeParser` consulted on each query) is checked against pg's parsers, again whenever one
 * of its parsers changed. Another driver, without `getTypeParser`, is not checked.
 */
export function foreignParser(client: object): string | null {
  const source = client as Partial<TypeSource> & { connection?: unknown; binary?: unknown };
  if (source.binary === true) return 'returns binary results (binary: true)';
  if (typeof source.getTypeParser !== 'function' || source.connection !== undefined) return null;
  let parsers: unknown[];
  try {
    parsers = SAMPLES.map(([oid]) => source.getTypeParser!(oid, 'text'));
  } catch {
    return 'cannot name its type parsers';
  }
  const last = checked.get(client);
  if (last?.parsers.every((parser, i) => parser === parsers[i])) return last.found;
  const found = firstMisread(parsers);
  checked.set(client, { parsers, found });
  return found;
}

/** A statement refused on a client that would misread the store's rows (see `foreignParser`). */
export class ForeignParserError extends Error {
  constructor(reason: string) {
    super(
      `nestjs-pg-idempotency: this client ${reason} and cannot take the store's own text parsers per statement (pg-native fixes them when the client is built), so the store would misread its records; the statement was not sent. Give the store a pool of the pg this library loads (its JavaScript client), or leave pg's parsers in place on this one.`,
    );
  }
}
