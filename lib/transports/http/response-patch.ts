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

export function patch(res: ServerResponse, methods: Partial<Record<Patched, Method>>) {
  const target = res as Patchable;
  const original = {
    writeHead: target.writeHead,
    write: target.write,
    end: target.end,
    flushHeaders: target.flushHeaders,
  };
  Object.assign(target, methods);
  return {
    original,
    restore: () => void Object.assign(target, original),
  };
}
