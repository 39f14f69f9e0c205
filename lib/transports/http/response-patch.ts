import { ServerResponse } from 'node:http';

export type Method = (...args: unknown[]) => unknown;
export type Patched = 'writeHead' | 'write' | 'end' | 'flushHeaders';
export type Patchable = ServerResponse & Record<Patched, Method>;

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
 * What Nest calls on the platform's response to reply to the route's return value: `status`
 * and `send`, and for a `@Redirect()` route `redirect`. The layer answers them for a response
 * silenced with `silenceThroughLayer` and passes them on for every other.
 */
export const PLATFORM_REPLY = ['status', 'send', 'redirect'] as const;
const silencedReplies = new WeakSet<object>();
/** The layers' own methods, so a method put on a layer by other code is not taken for one. */
const standIns = new WeakSet<Method>();

/**
 * Express gives each response its app's own prototype (`app.response`, the one with an own
 * `app`): a layer of dispatchers put under it once serves every response of the app, so a
 * response is patched or silenced with no change to its prototype (a `setPrototypeOf` per
 * response costs ~2 µs, ~1 KB and a new map). The layer looks each method up above it on every
 * call, so what is patched there later still applies. Only a prototype of Node's responses gets
 * a layer, and Node's own prototypes never do: their responses (Fastify's raw ones) get a child
 * each. Returns what is above the layer, or null when the layer is not (or no longer) what `base`
 * resolves through.
 */
function layerUnder(base: object): Patchable | null {
  let layer = layers.get(base);
  if (layer === undefined) {
    layer = null;
    const above = Object.getPrototypeOf(base) as Patchable | null;
    if (Object.hasOwn(base, 'app') && above instanceof ServerResponse) {
      const created = Object.create(
        above,
        Object.getOwnPropertyDescriptors(lookups(above)),
      ) as object;
      if (Reflect.setPrototypeOf(base, created)) layer = created;
    }
    layers.set(base, layer);
  }
  if (layer === null || Object.getPrototypeOf(base) !== layer) return null;
  return Object.getPrototypeOf(layer) as Patchable;
}

/** `method` named and sized as the one it stands for, for stack traces and code that looks. */
function standIn(method: Method, name: string, original: Method | undefined): Method {
  Object.defineProperty(method, 'name', { value: name });
  Object.defineProperty(method, 'length', { value: original?.length ?? 0 });
  standIns.add(method);
  return method;
}

/**
 * The layer's methods: the response's own patch, else the method `above` has now; and the
 * platform's reply methods `above` has, no-ops on a silenced response.
 */
function lookups(above: Patchable): Record<string, Method> {
  const methods: Record<string, Method> = {};
  const methodsAbove = above as unknown as Record<string, Method | undefined>;
  for (const name of PATCHED) {
    methods[name] = standIn(
      function (this: Patchable, ...args: unknown[]) {
        return (patches.get(this)?.[name] ?? above[name]).apply(this, args);
      },
      name,
      above[name],
    );
  }
  for (const name of PLATFORM_REPLY) {
    if (typeof methodsAbove[name] !== 'function') continue;
    methods[name] = standIn(
      function (this: object, ...args: unknown[]) {
        return silencedReplies.has(this) ? this : methodsAbove[name]!.apply(this, args);
      },
      name,
      methodsAbove[name],
    );
  }
  return methods;
}

/**
 * Makes the platform's reply methods no-ops on `res` (one with none of them as its own
 * property) through its app's layer, leaving its prototype alone. False where the layer does not
 * decide them (no layer, or one of them missing from it, replaced on it, or set on the app's
 * prototype). Silencing goes by identity: a proxy or child of `res` is not silenced.
 */
export function silenceThroughLayer(res: ServerResponse): boolean {
  const base = Object.getPrototypeOf(res) as object;
  if (layerUnder(base) === null) return false;
  const layer = Object.getPrototypeOf(base) as Record<string, Method>;
  for (const name of PLATFORM_REPLY) {
    if (Object.hasOwn(base, name) || !Object.hasOwn(layer, name) || !standIns.has(layer[name])) {
      return false;
    }
  }
  silencedReplies.add(res);
  return true;
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
  if (above !== null && !PATCHED.some((name) => Object.hasOwn(base, name))) {
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
