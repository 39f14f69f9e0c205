import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

export type Method = (...args: unknown[]) => unknown;
export type Patched = 'writeHead' | 'write' | 'end' | 'flushHeaders';
export type Patchable = ServerResponse & Record<Patched, Method>;

/** Headers describing the body (a replay takes them from storage only), and cookies (never replayed). */
export const BODY_HEADERS = [
  'set-cookie',
  'content-length',
  'content-type',
  'content-encoding',
  'transfer-encoding',
  'etag',
  'last-modified',
];

export function headersArg(args: unknown[]): OutgoingHttpHeaders | undefined {
  const last = args[args.length - 1];
  return last && typeof last === 'object' && !Array.isArray(last)
    ? (last as OutgoingHttpHeaders)
    : undefined;
}

const PATCHED: readonly Patched[] = ['writeHead', 'write', 'end', 'flushHeaders'];
/** The methods a patched response answers with, beside it rather than on it. */
const patches = new WeakMap<object, Partial<Record<Patched, Method>>>();
/** Per prototype (Express's app.response, http.ServerResponse.prototype): its patching child. */
const children = new WeakMap<object, object>();

/**
 * Gives `target` a child of its own prototype that carries `methods(base)` (made once per
 * prototype, kept in `cache`) instead of new own properties: adding properties to a response
 * grows its property store and migrates its map on every request. Returns the prototype it had.
 */
export function shadowPrototype<T extends object>(
  target: T,
  cache: WeakMap<object, object>,
  methods: (base: T) => Record<string, Method>,
): T {
  const base = Object.getPrototypeOf(target) as T;
  let child = cache.get(base);
  if (!child) {
    child = Object.create(base, Object.getOwnPropertyDescriptors(methods(base))) as object;
    cache.set(base, child);
  }
  Object.setPrototypeOf(target, child);
  return base;
}

/** Methods that answer with the response's own patch, else with what `base` has. */
function dispatchers(base: Patchable): Record<string, Method> {
  const methods: Record<string, Method> = {};
  for (const name of PATCHED) {
    const inherited = base[name];
    methods[name] = function (this: Patchable, ...args: unknown[]) {
      const own = patches.get(this)?.[name];
      return (own ?? inherited).apply(this, args);
    };
  }
  return methods;
}

/**
 * Routes `res`'s writeHead/write/end/flushHeaders to `methods` until `restore()`, through
 * `shadowPrototype`. A response that already carries one of them as its own property (Express's
 * compression middleware) is patched in place.
 */
export function patch(res: ServerResponse, methods: Partial<Record<Patched, Method>>) {
  const target = res as Patchable;
  const original = {
    writeHead: target.writeHead,
    write: target.write,
    end: target.end,
    flushHeaders: target.flushHeaders,
  };
  if (PATCHED.some((name) => Object.hasOwn(target, name))) {
    Object.assign(target, methods);
    return { original, restore: () => void Object.assign(target, original) };
  }
  patches.set(target, methods);
  const base = shadowPrototype(target, children, dispatchers);
  return {
    original,
    restore: () => {
      patches.delete(target);
      Object.setPrototypeOf(target, base);
    },
  };
}
