import type { WireResponse } from './handler-outcome.js';

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F][0-9a-fA-F]{2}/;
/** A number token whose exponent overflows PostgreSQL's numeric (and hence jsonb). */
const HUGE_EXPONENT = /(^|[:[,])\s*-?\d+(\.\d+)?[eE][+-]?\d{5,}/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The queryable `jsonb` copy of a JSON body, or undefined when PostgreSQL could not take it
 * (NUL, a lone surrogate escape, a number numeric cannot hold): the raw bytes are stored anyway,
 * so such a response is still replayed, it is only missing from SQL queries on the body.
 */
export function jsonCopy(wire: WireResponse): { text: string; value: unknown } | undefined {
  if (!(wire.headers['content-type'] ?? '').includes('json')) return undefined;
  const text = wire.body.toString('utf8');
  if (text.includes('\\u0000') || HUGE_EXPONENT.test(text)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (SURROGATE_ESCAPE.test(text) && !wellFormed(value)) return undefined;
  return { text, value };
}

function wellFormed(root: unknown): boolean {
  const stack = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === 'string') {
      if (LONE_SURROGATE.test(value)) return false;
    } else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        if (LONE_SURROGATE.test(key)) return false;
        stack.push(item);
      }
    }
  }
  return true;
}
