import type { ServerResponse } from 'node:http';
import type { StoredResponse } from '../../interfaces/idempotency-store.interface.js';
import { hijack, type PlatformResponse, rawResponse } from '../../request/http-adapter.utils.js';
import { BODY_HEADERS } from './response-headers.js';
import { PLATFORM_REPLY, shadowPrototype, silenceThroughLayer } from './response-patch.js';

/**
 * Answers with a stored response, written here whole; the platform's own reply of the
 * `undefined` the route returns is silenced unless the route writes its response itself.
 * `sent` runs once the bytes left: never for a client that went away before.
 */
export function replayStoredResponse(
  res: PlatformResponse,
  stored: StoredResponse,
  options: { replayedHeader: string; ownsResponse: boolean; sent: () => void },
): void {
  const raw = rawResponse(res);
  adoptReplyHeaders(res, raw);
  hijack(res);
  raw.once('finish', options.sent);
  writeStoredResponse(raw, stored, options.replayedHeader);
  if (!options.ownsResponse) silencePlatformReply(res);
}

/**
 * Writes a stored response as it was sent: its status, its headers (body headers and cookies
 * only from storage; other headers already set, e.g. by CORS middleware, stay), its bytes.
 */
export function writeStoredResponse(
  res: ServerResponse,
  stored: StoredResponse,
  replayedHeader: string,
): void {
  const headers = stored.headers;
  for (const name of BODY_HEADERS) res.removeHeader(name);
  for (const name in headers) res.setHeader(name, headers[name]);
  const body = stored.body ?? Buffer.alloc(0);
  if (stored.statusCode !== 204 && stored.statusCode !== 304) {
    res.setHeader('content-length', body.length);
  }
  res.setHeader(replayedHeader, 'true');
  res.statusCode = stored.statusCode;
  res.end(body);
}

function returnThis(this: unknown): unknown {
  return this;
}

function noOps(): Record<string, typeof returnThis> {
  return Object.fromEntries(PLATFORM_REPLY.map((name) => [name, returnThis]));
}

/** Per prototype the layer does not serve (Fastify's Reply): its child whose reply methods do nothing. */
const silenced = new WeakMap<object, object>();

/**
 * After a replay was written: Nest still replies to the `undefined` the route returned
 * (`status(code)` then `send()`, or `redirect()` for a `@Redirect()` route: Express's
 * `res.redirect(status, url)` sets `Location` on the ended response and throws
 * ERR_HTTP_HEADERS_SENT; Fastify's is `reply.status(code).redirect(url)`). They become no-ops on
 * this response only: through the app's dispatcher layer on Express, else through a child
 * prototype. So the status seen by `finish` listeners (access logs) stays the replayed one,
 * nothing is set on the ended response, and Fastify does not build an "already sent" error per
 * replay.
 */
export function silencePlatformReply(res: PlatformResponse): void {
  if (PLATFORM_REPLY.some((name) => Object.hasOwn(res, name))) {
    Object.assign(res, noOps());
    return;
  }
  const raw = rawResponse(res);
  if (raw === res && silenceThroughLayer(raw)) return;
  shadowPrototype(res as object, silenced, noOps);
}

/**
 * Fastify keeps headers set through the reply (`reply.header()`, e.g. by @fastify/cors) apart
 * from the raw response until it sends; a replay written on the raw response takes them along.
 */
export function adoptReplyHeaders(res: PlatformResponse, raw: ServerResponse): void {
  if (res === raw || typeof res.getHeaders !== 'function') return;
  const headers = res.getHeaders() as Record<string, string | number | string[]>;
  for (const name in headers) {
    if (headers[name] !== undefined) raw.setHeader(name, headers[name]);
  }
}
