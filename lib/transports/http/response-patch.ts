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

function patchingChild(base: Patchable): object {
  let child = children.get(base);
  if (!child) {
    const methods: Partial<Record<Patched, Method>> = {};
    for (const name of PATCHED) {
      const inherited = base[name];
      methods[name] = function (this: Patchable, ...args: unknown[]) {
        const own = patches.get(this)?.[name];
        return (own ?? inherited).apply(this, args);
      };
    }
    child = Object.create(base, Object.getOwnPropertyDescriptors(methods)) as object;
    children.set(base, child);
  }
  return child;
}

/**
 * Routes `res`'s writeHead/write/end/flushHeaders to `methods` until `restore()`. The response is
 * given a child of its own prototype (one per prototype, cached), not four new properties: adding
 * properties to a ServerResponse grows its property store and migrates its map on every request.
 * A response that already carries one of them as its own property is patched in place.
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
  const base = Object.getPrototypeOf(target) as Patchable;
  patches.set(target, methods);
  Object.setPrototypeOf(target, patchingChild(base));
  return {
    original,
    restore: () => {
      patches.delete(target);
      Object.setPrototypeOf(target, base);
    },
  };
}
