import { createHash, hash } from 'node:crypto';

/**
 * SHA-256 over method, path and a canonical form of the selected request part: JSON with
 * object keys sorted, so the same logical body in another key order gives the same hash.
 * Raw bodies (Buffer, string) are hashed as their bytes.
 */
export function fingerprintRequest(method: string, path: string, body: unknown): string {
  const head = `${method}\n${path}\n`;
  // One update of one string where possible: the same bytes, so the same hash as part by part.
  if (Buffer.isBuffer(body))
    return createHash('sha256')
      .update(head + 'b')
      .update(body)
      .digest('hex');
  let text = head;
  if (typeof body === 'string') text += 's' + body;
  else if (body !== undefined) text += 'j' + canonicalJson(body);
  return hash('sha256', text);
}

/** `canonicalJson`, without its work for the usual empty params and query (`{}`). */
export function canonicalJsonOfRecord(value: object | undefined): string {
  if (value === undefined || value === null) return '{}';
  if (typeof (value as { toJSON?: unknown }).toJSON !== 'function') {
    // for...in sees every key Object.keys does: none here means canonicalJson would say `{}`.
    for (const key in value) if (key !== undefined) return canonicalJson(value);
    return '{}';
  }
  return canonicalJson(value);
}

type Frame = { value: unknown; keys?: string[]; index: number; isArray: boolean; wrote?: boolean };

/**
 * A value whose JSON says nothing of it (a Promise, a Map or Set: `{}`) or never ends (a cycle):
 * hashed, every request would be the same request, or the process would run out of memory.
 */
export class UnhashableValueError extends Error {}

function refuseUnhashable(value: object, path: Set<object>): void {
  if (path.has(value)) throw new UnhashableValueError('it refers to itself (a cycle)');
  if (typeof (value as { then?: unknown }).then === 'function')
    throw new UnhashableValueError('it holds a Promise');
  if (Array.isArray(value)) return;
  const proto = Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null;
  // Plain objects, also one built on another (a params object on its parent router's) or on a
  // bare prototype (fast-querystring's and find-my-way's `new Empty()`, Fastify's forms and params).
  if (proto === null || proto === Object.prototype) return;
  if (proto.constructor === Object || proto.constructor === undefined) return;
  // A Map, Set, Blob, File, ArrayBuffer, URLSearchParams, FormData, RegExp, a value class whose
  // own keys are all methods: nothing JSON writes, yet it holds data.
  for (const key in value)
    if (Object.hasOwn(value, key) && !skip((value as Record<string, unknown>)[key])) return;
  const name = proto.constructor?.name ?? 'value';
  throw new UnhashableValueError(`it holds a ${name}, whose JSON is {}`);
}

/** A Buffer as its JSON (`{"data":[...],"type":"Buffer"}`, keys sorted) in one native join. */
const bufferJson = (buf: Buffer): string =>
  `{"data":[${Array.prototype.join.call(buf, ',')}],"type":"Buffer"}`;

/**
 * JSON.stringify with sorted keys; iterative, so a deeply nested body cannot overflow the stack.
 * Throws `UnhashableValueError` where JSON.stringify would say `{}` of a Promise, Map or Set, or
 * never end.
 */
export function canonicalJson(root: unknown): string {
  let out = '';
  const stack: Frame[] = [];
  const path = new Set<object>();
  const open = (value: unknown): void => {
    if (Buffer.isBuffer(value)) {
      out += bufferJson(value);
      return;
    }
    if (
      value !== null &&
      typeof value === 'object' &&
      typeof (value as { toJSON?: unknown }).toJSON === 'function'
    ) {
      value = (value as { toJSON(): unknown }).toJSON();
    }
    if (value === null || typeof value !== 'object') {
      // A bigint (graphql-scalars' BigInt) as its digits: the number it equals below 2^53 hashes alike.
      out += typeof value === 'bigint' ? value.toString() : (JSON.stringify(value) ?? 'null');
      return;
    }
    refuseUnhashable(value, path);
    path.add(value);
    if (Array.isArray(value)) {
      out += '[';
      stack.push({ value, index: 0, isArray: true });
    } else {
      out += '{';
      const keys = Object.keys(value).sort();
      stack.push({ value, keys, index: 0, isArray: false });
    }
  };
  open(root);
  while (stack.length > 0) {
    const frame = stack[stack.length - 1];
    if (frame.isArray) {
      const arr = frame.value as unknown[];
      if (frame.index >= arr.length) {
        out += ']';
        path.delete((stack.pop() as Frame).value as object);
        continue;
      }
      if (frame.index > 0) out += ',';
      open(arr[frame.index++]);
    } else {
      const keys = frame.keys as string[];
      const obj = frame.value as Record<string, unknown>;
      // Skip what JSON.stringify skips.
      while (frame.index < keys.length && skip(obj[keys[frame.index]])) frame.index++;
      if (frame.index >= keys.length) {
        out += '}';
        path.delete((stack.pop() as Frame).value as object);
        continue;
      }
      if (frame.wrote) out += ',';
      frame.wrote = true;
      const key = keys[frame.index++];
      out += JSON.stringify(key) + ':';
      open(obj[key]);
    }
  }
  return out;
}

function skip(v: unknown): boolean {
  return v === undefined || typeof v === 'function' || typeof v === 'symbol';
}
