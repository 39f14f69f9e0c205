import type { ServerResponse } from 'node:http';
import type { IdempotencyRequest } from '../interfaces/idempotency-module-options.interface.js';

/** Small reads that differ between Express and Fastify, in one place. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type PlatformResponse = any;

export function rawResponse(res: PlatformResponse): ServerResponse {
  return (res.raw ?? res) as ServerResponse;
}

export function rawHeaders(req: IdempotencyRequest): string[] {
  return (req.raw ?? req).rawHeaders ?? [];
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

/** Whether the request carries a body (whether or not a parser read it). */
export function hasBody(req: IdempotencyRequest): boolean {
  const headers = (req.raw ?? req).headers ?? {};
  const length = headers['content-length'];
  return (length !== undefined && length !== '0') || headers['transfer-encoding'] !== undefined;
}
