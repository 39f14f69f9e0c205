import { IDEMPOTENCY_DEFAULTS } from '../../lib/idempotency.defaults.js';

/** `IDEMPOTENCY_DEFAULTS` by the names the docs use: `cleanup.cron`, `storeResponse`, ... */
export function flatDefaults(): Map<string, unknown> {
  const flat = new Map<string, unknown>();
  for (const [key, value] of Object.entries(IDEMPOTENCY_DEFAULTS)) {
    if (key === 'cleanup') {
      for (const [k, v] of Object.entries(value as object)) flat.set(`cleanup.${k}`, v);
    } else flat.set(key, value);
  }
  return flat;
}

const UNITS: Record<string, number> = { KiB: 1024, MiB: 1024 ** 2 };
const number = (text: string) => {
  const [n, unit] = text.trim().split(/\s+/);
  return Number(n) * (unit ? UNITS[unit] : 1);
};

/** Reads a default as the options page shows it, in the shape of the value it should equal. */
export function shownValue(text: string, like: unknown): unknown {
  const bare = text.trim().replace(/^'(.*)'$/, '$1');
  if (typeof like === 'number') return number(bare);
  if (typeof like === 'boolean') return bare === 'true' ? true : bare === 'false' ? false : bare;
  if (Array.isArray(like)) return bare.split(/,\s*/);
  if (like && typeof like === 'object') {
    const pairs = bare.replace(/^\{|\}$/g, '').split(',');
    return Object.fromEntries(
      pairs.map((pair) => {
        const [k, v] = pair.split(':');
        return [k.trim(), number(v)];
      }),
    );
  }
  return bare;
}
