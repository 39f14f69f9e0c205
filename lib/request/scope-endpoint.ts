import { hash } from 'node:crypto';

/** The `endpoint` column's width (`varchar(255)`), in characters. */
export const MAX_ENDPOINT_LENGTH = 255;
const HEAD_LENGTH = MAX_ENDPOINT_LENGTH - 2 - 64;

/** Length in characters as PostgreSQL counts them (code points), not UTF-16 units. */
export function characters(text: string): number {
  return text.length <= MAX_ENDPOINT_LENGTH ? text.length : [...text].length;
}

/**
 * A derived endpoint (route pattern with a global prefix, an RPC pattern) as it fits the column:
 * unchanged up to 255 characters; a longer one keeps its start, readable in finance queries, and
 * ends in ` #` and the SHA-256 of the whole, so two long routes never share a scope. Without this
 * PostgreSQL refused every claim on such a route, and each keyed request got a 503 "retry later".
 */
export function scopeEndpoint(endpoint: string): string {
  if (characters(endpoint) <= MAX_ENDPOINT_LENGTH) return endpoint;
  // Never cut a surrogate pair in two: PostgreSQL would get a lone half.
  const cut = /[\uD800-\uDBFF]/.test(endpoint[HEAD_LENGTH - 1]) ? HEAD_LENGTH - 1 : HEAD_LENGTH;
  return `${endpoint.slice(0, cut)} #${hash('sha256', endpoint)}`;
}
