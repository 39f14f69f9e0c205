import type { ServerResponse } from 'node:http';

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

/**
 * `writeHead(status[, message][, headers])`'s headers argument, in the form it was given: an
 * object, or an array (Node's flat `[name, value, name, value]`, or `[name, value]` pairs).
 */
export function headersArg(args: readonly unknown[]): object | undefined {
  const last = args[args.length - 1];
  return last && typeof last === 'object' ? last : undefined;
}

/** A copy of `writeHead`'s arguments whose headers argument is a copy of its own, same form. */
export function copyHeadArgs(args: readonly unknown[]): unknown[] {
  const headers = headersArg(args);
  return args.map((a) =>
    a !== headers
      ? a
      : Array.isArray(a)
        ? a.map((e: unknown) => (Array.isArray(e) ? [...e] : e))
        : { ...(a as object) },
  );
}

/**
 * `writeHead`'s headers as name/value entries in the order given, whichever form they came in
 * (Node sets them one by one over the response's own, a later one of a name winning). Array
 * entries without a name are skipped, as Node does.
 */
export function headEntries(args: readonly unknown[]): [string, unknown][] {
  const headers = headersArg(args);
  if (headers === undefined) return [];
  if (!Array.isArray(headers)) return Object.entries(headers);
  const entries: [string, unknown][] = [];
  const pairs = Array.isArray(headers[0]);
  for (let i = 0; i < headers.length; i += pairs ? 1 : 2) {
    const [name, value] = pairs ? (headers[i] as unknown[]) : [headers[i], headers[i + 1]];
    if (name) entries.push([String(name), value]);
  }
  return entries;
}

/** The allow-listed headers of `all` as they are stored: one string each, lists joined. */
export function replayableHeaders(
  all: object,
  allow: ReadonlySet<string>,
  except?: string,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(all) as [string, unknown][]) {
    if (!allow.has(name) || value === undefined || name === except) continue;
    headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return headers;
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

/** Per app-level response prototype: the dispatcher layer put under it, or null where none can be. */
const layers = new WeakMap<object, object | null>();

/**
 * Express gives each response its app's own prototype (`app.response`, the one with an own
 * `app`): a layer of dispatchers put under it once serves every response of the app, so a
 * response is patched with no change to its prototype (two `setPrototypeOf` per response cost
 * ~4 µs and a new map each). The layer looks each method up above it on every call, so what is
 * patched there later still applies. Node's own prototypes are never changed: their responses
 * (Fastify's) get a child each. Returns what is above the layer, or null when the layer is not
 * (or no longer) what `base` resolves the methods through.
 */
function layerUnder(base: object): Patchable | null {
  let layer = layers.get(base);
  if (layer === undefined) {
    layer = null;
    const above = Object.getPrototypeOf(base) as Patchable | null;
    if (Object.hasOwn(base, 'app') && above !== null) {
      const created = Object.create(
        above,
        Object.getOwnPropertyDescriptors(lookups(above)),
      ) as object;
      if (Reflect.setPrototypeOf(base, created)) layer = created;
    }
    layers.set(base, layer);
  }
  if (layer === null || Object.getPrototypeOf(base) !== layer) return null;
  for (const name of PATCHED) if (Object.hasOwn(base, name)) return null;
  return Object.getPrototypeOf(layer) as Patchable;
}

/** The layer's methods: the response's own patch, else the method `above` has now. */
function lookups(above: Patchable): Record<string, Method> {
  const methods: Record<string, Method> = {};
  for (const name of PATCHED) {
    const method = function (this: Patchable, ...args: unknown[]) {
      return (patches.get(this)?.[name] ?? above[name]).apply(this, args);
    };
    // Named and sized as the method it stands for, for stack traces and code that looks.
    Object.defineProperty(method, 'name', { value: name });
    Object.defineProperty(method, 'length', { value: above[name]?.length ?? 0 });
    methods[name] = method;
  }
  return methods;
}

function pick(res: Patchable): Record<Patched, Method> {
  return {
    writeHead: res.writeHead,
    write: res.write,
    end: res.end,
    flushHeaders: res.flushHeaders,
  };
}

/**
 * Routes `res`'s writeHead/write/end/flushHeaders to `methods` until `restore()`: through the
 * app's dispatcher layer (`layerUnder`), else through `shadowPrototype`. A response that already
 * carries one of them as its own property (Express's compression middleware) is patched in place.
 * `original` are the methods it had, which never reach `methods`.
 */
export function patch(res: ServerResponse, methods: Partial<Record<Patched, Method>>) {
  const target = res as Patchable;
  if (PATCHED.some((name) => Object.hasOwn(target, name))) {
    const original = pick(target);
    Object.assign(target, methods);
    return { original, restore: () => void Object.assign(target, original) };
  }
  const base = Object.getPrototypeOf(target) as object;
  const above = layerUnder(base);
  if (above !== null) {
    patches.set(target, methods);
    return { original: pick(above), restore: () => void patches.delete(target) };
  }
  const original = pick(target);
  patches.set(target, methods);
  shadowPrototype(target, children, dispatchers);
  return {
    original,
    restore: () => {
      patches.delete(target);
      Object.setPrototypeOf(target, base);
    },
  };
}
