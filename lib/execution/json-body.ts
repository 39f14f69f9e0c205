import type { WireResponse } from './handler-outcome.js';

/** The parsed body of a JSON response (what `transactionId()` derives the id from), else undefined. */
export function jsonBody(wire: WireResponse): { value: unknown } | undefined {
  if (!(wire.headers['content-type'] ?? '').includes('json')) return undefined;
  try {
    return { value: JSON.parse(wire.body.toString('utf8')) };
  } catch {
    return undefined;
  }
}
