import { UnhashableValueError } from '../../execution/request-fingerprint.js';

/** How long a Promise in a call's input may take to settle before the call is refused. */
export const SETTLE_TIMEOUT_MS = 5_000;

/** A Promise in a call's input that did not settle in time (nothing was claimed). */
export class UnsettledInputError extends Error {}

/**
 * A call's input with every Promise in it awaited (a GraphQL `Upload` argument: graphql-upload's
 * scalar gives the resolver a Promise of the file). Synchronous, and the same value, when it holds
 * none, so most calls await nothing. What the Promise resolves to is hashed (for an upload its
 * file name, MIME type and encoding; functions such as `createReadStream` are not JSON). One that
 * cannot settle before the resolver runs (graphql-upload-minimal resolves a second file only once
 * the first is read) is refused after `SETTLE_TIMEOUT_MS`, not awaited for ever.
 */
export function settledInput(value: unknown, timeoutMs = SETTLE_TIMEOUT_MS): unknown {
  if (!holdsPromise(value)) return value;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new UnsettledInputError(`a Promise in it did not settle in ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  const settled = settle(value, new Set()).catch((err: unknown) => {
    // settle() recurses: an input deeper than the stack is refused, as one that cannot be hashed.
    if (err instanceof RangeError) throw new UnhashableValueError('it is nested too deeply');
    throw err;
  });
  return Promise.race([settled, late]).finally(() => clearTimeout(timer));
}

const isThenable = (v: unknown): v is PromiseLike<unknown> =>
  v !== null && typeof v === 'object' && typeof (v as { then?: unknown }).then === 'function';

/** Iterative, so a deeply nested input cannot overflow the stack; bytes are not walked. */
function holdsPromise(root: unknown): boolean {
  const seen = new Set<object>();
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (value === null || typeof value !== 'object' || seen.has(value)) continue;
    if (isThenable(value)) return true;
    if (ArrayBuffer.isView(value)) continue;
    seen.add(value);
    for (const key in value) stack.push((value as Record<string, unknown>)[key]);
  }
  return false;
}

const isPlain = (v: object): boolean => {
  const proto: unknown = Object.getPrototypeOf(v);
  return Array.isArray(v) || proto === Object.prototype || proto === null;
};

/** A copy of the plain objects and arrays on the way to each Promise; other objects as they are. */
async function settle(value: unknown, path: Set<object>): Promise<unknown> {
  const v = isThenable(value) ? await value : value;
  if (v === null || typeof v !== 'object' || path.has(v) || !isPlain(v)) return v;
  path.add(v);
  try {
    // All at once, as Nest resolves arguments: each Promise has a handler before any rejects.
    if (Array.isArray(v)) return await Promise.all(v.map((item) => settle(item, path)));
    const entries = Object.entries(v);
    const settled = await Promise.all(entries.map(([, item]) => settle(item, path)));
    return Object.fromEntries(entries.map(([key], i) => [key, settled[i]]));
  } finally {
    path.delete(v);
  }
}
