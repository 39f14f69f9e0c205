import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import type { StoredResponse } from '../store/idempotency-store.interface.js';

const DECODERS: Record<string, (body: Buffer) => Buffer> = {
  gzip: gunzipSync,
  'x-gzip': gunzipSync,
  deflate: inflateSync,
  br: brotliDecompressSync,
};

/** Whether `Accept-Encoding` accepts `coding` (q > 0, by name or `*`); none sent accepts none. */
export function acceptsEncoding(header: string | string[] | undefined, coding: string): boolean {
  const offers = (Array.isArray(header) ? header.join(',') : (header ?? '')).toLowerCase();
  let wildcard = false;
  for (const offer of offers.split(',')) {
    const [name, ...params] = offer.split(';').map((p) => p.trim());
    const q = params.find((p) => p.startsWith('q='));
    const accepted = q === undefined || Number(q.slice(2)) > 0;
    if (name === coding) return accepted;
    if (name === '*') wildcard = accepted;
  }
  return wildcard;
}

/**
 * A stored response whose body is content-coded (a handler, or a plugin without the library's
 * hook, sent gzip) is decoded for a client that does not accept that coding: a replay must be
 * readable by whoever retries, not only by the client that asked first.
 */
export function replayFor(
  stored: StoredResponse,
  acceptEncoding: string | string[] | undefined,
): StoredResponse {
  const coding = stored.headers['content-encoding']?.trim().toLowerCase();
  if (!coding || coding === 'identity' || stored.body === null) return stored;
  const decode = DECODERS[coding];
  if (!decode || acceptsEncoding(acceptEncoding, coding)) return stored;
  let body: Buffer;
  try {
    body = decode(stored.body);
  } catch {
    return stored;
  }
  const { 'content-encoding': _coded, ...headers } = stored.headers;
  return { ...stored, headers, body };
}
