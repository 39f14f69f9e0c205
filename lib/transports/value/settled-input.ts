/**
 * A call's input with every Promise in it awaited (a GraphQL `Upload` argument: graphql-upload's
 * scalar gives the resolver a Promise of the file). Synchronous, and the same value, when it holds
 * none, so most calls await nothing. What the Promise resolves to is hashed (for an upload its
 * file name, MIME type and encoding; functions such as `createReadStream` are not JSON).
 */
export function settledInput(value: unknown): unknown {
  return holdsPromise(value, new Set()) ? settle(value, new Set()) : value;
}

const isThenable = (v: unknown): v is PromiseLike<unknown> =>
  v !== null && typeof v === 'object' && typeof (v as { then?: unknown }).then === 'function';

function holdsPromise(value: unknown, seen: Set<object>): boolean {
  if (value === null || typeof value !== 'object' || seen.has(value)) return false;
  if (isThenable(value)) return true;
  seen.add(value);
  return Object.values(value).some((v) => holdsPromise(v, seen));
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
    if (Array.isArray(v)) return await Promise.all(v.map((item) => settle(item, path)));
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(v)) out[key] = await settle(item, path);
    return out;
  } finally {
    path.delete(v);
  }
}
