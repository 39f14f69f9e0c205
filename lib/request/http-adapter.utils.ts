import type { ServerResponse } from 'node:http';
import type { IdempotencyRequest } from '../interfaces/idempotency-module-options.interface.js';

/** Small reads that differ between Express and Fastify, in one place. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type PlatformResponse = any;

export function rawResponse(res: PlatformResponse): ServerResponse {
  return (res.raw ?? res) as ServerResponse;
}

/**
 * The client is gone: its response destroyed, its HTTP/2 stream (a compatibility response has no
 * `destroyed` of its own), or its connection (a pipelined response still queued behind another has
 * no socket of its own yet, and is never destroyed).
 */
export function clientGone(raw: ServerResponse): boolean {
  if (raw.destroyed) return true;
  const stream = (raw as { stream?: { destroyed?: boolean } }).stream;
  if (stream) return stream.destroyed === true;
  return raw.req?.socket?.destroyed === true;
}

/**
 * The key header as the app sees it (`req.headers`), as the parser's name/value list: what a
 * middleware set or a serverless adapter filled counts, not only what came on the socket. Node
 * joins a header sent twice into one `a, b`, which the parser refuses as a list; when that reads
 * as one quoted key (`"a` and `b"`), the lines that came on the socket are given instead.
 */
export function keyHeader(req: IdempotencyRequest, lowerName: string): string[] {
  const value: unknown = req.headers?.[lowerName];
  if (value === undefined) return [];
  if (Array.isArray(value)) return value.flatMap((v) => [lowerName, String(v)]);
  const text = String(value);
  if (text.includes(',')) {
    const sent = linesOf(req.raw?.rawHeaders ?? req.rawHeaders, lowerName);
    if (sent.length > 2) return sent;
  }
  return [lowerName, text];
}

function linesOf(rawHeaders: unknown, lowerName: string): string[] {
  if (!Array.isArray(rawHeaders)) return [];
  const lines: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = String(rawHeaders[i]);
    if (name.toLowerCase() === lowerName) lines.push(lowerName, String(rawHeaders[i + 1]));
  }
  return lines;
}

/** `METHOD /route/:pattern`, the default scope name of a route. */
export function routeEndpoint(req: IdempotencyRequest, method: string = req.method): string {
  const pattern: string =
    req.route?.path ?? req.routeOptions?.url ?? String(req.originalUrl ?? req.url).split('?')[0];
  return `${method} ${pattern}`;
}

/** Sets a header through the platform, so Fastify does not overwrite it from its own list. */
export function setResponseHeader(res: PlatformResponse, name: string, value: string): void {
  if (typeof res.header === 'function') res.header(name, value);
  else res.setHeader(name, value);
}

/** Tells Fastify that the raw response is written by hand; a no-op on Express. */
export function hijack(res: PlatformResponse): void {
  if (typeof res.hijack === 'function') res.hijack();
}

/**
 * Whether the request carries a body (whether or not a parser read it). Over HTTP/2 a body needs
 * no length, and a bodiless POST (Node's client) also keeps its stream open after the headers
 * until an empty DATA frame: the first thing to come, bytes or the end, tells, and is left
 * unread for the handler.
 */
export function hasBody(req: IdempotencyRequest): boolean | Promise<boolean> {
  const headers = req.headers ?? {};
  const length = headers['content-length'];
  if (length !== undefined) return length !== '0';
  if (headers['transfer-encoding'] !== undefined) return true;
  const raw = req.raw ?? req;
  const stream = raw.stream as { endAfterHeaders?: unknown; readableDidRead?: unknown } | undefined;
  if (stream?.endAfterHeaders !== false) return false;
  // Bytes already handed to a reader (a guard checking a signature) came, whoever read them, from
  // the request or from its HTTP/2 stream underneath (which only a reader of either makes flow).
  if (raw.readableLength > 0 || raw.readableDidRead === true || stream.readableDidRead === true)
    return true;
  if (raw.readableEnded) return false;
  return new Promise((resolve) => {
    // 'readable' comes with the first bytes, or at the end with none; a stream that already ended
    // (its empty DATA frame came during an async guard) emits only 'end'. Node ends a stream the
    // client cancels before its END_STREAM as if it had ended (no body); a request closed
    // without either counts as one with a body (refused, not run).
    const settle = (body: boolean) => {
      raw.off('readable', onReadable);
      raw.off('end', onEnd);
      raw.off('close', onClose);
      resolve(body);
    };
    const onReadable = () => settle(raw.readableLength > 0);
    const onEnd = () => settle(false);
    const onClose = () => settle(true);
    raw.on('end', onEnd);
    raw.on('close', onClose);
    raw.on('readable', onReadable);
  });
}
