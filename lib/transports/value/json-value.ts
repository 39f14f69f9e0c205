/** Why a returned value cannot be stored; the handler has run, so its key is never freed for it. */
export class UnencodableValueError extends Error {
  override readonly name = 'UnencodableValueError';
}

/** The value grew past `maxResponseBytes` while being encoded. */
export class ValueTooLargeError extends UnencodableValueError {}

/** Deeper than this, a value is refused rather than risk the stack (JSON.stringify's own limit is near 10 000). */
export const MAX_VALUE_DEPTH = 1_000;

/**
 * How much encoding may still write, in bytes of JSON (approximately, never below the truth for
 * ASCII): once spent, the value is refused instead of growing without bound.
 */
export class EncodeBudget {
  constructor(private left: number) {}

  spend(bytes: number): void {
    this.left -= bytes;
    if (this.left < 0) throw new ValueTooLargeError('the value is larger than maxResponseBytes');
  }
}

/**
 * A plain copy of `value` as `JSON.stringify` would write it (`toJSON()` applied, `undefined` and
 * functions dropped from objects and `null` in arrays), refusing what JSON cannot hold: a
 * `BigInt`, a cycle, a non-finite number as anything but `null`, an over-deep or over-large value.
 */
export function plainJson(value: unknown, budget: EncodeBudget, depth = 0): unknown {
  const ancestors = new Set<object>();
  const copy = (v: unknown, level: number): unknown => {
    // As JSON.stringify: a bigint too (an app that patched `BigInt.prototype.toJSON`, as Prisma apps do).
    if (
      ((v !== null && typeof v === 'object') || typeof v === 'bigint') &&
      typeof (v as { toJSON?: unknown }).toJSON === 'function'
    ) {
      v = (v as { toJSON(): unknown }).toJSON();
    }
    switch (typeof v) {
      case 'string':
        budget.spend(v.length + 2);
        return v;
      case 'number':
        budget.spend(8);
        return Number.isFinite(v) ? v : null;
      case 'boolean':
        budget.spend(5);
        return v;
      case 'bigint':
        throw new UnencodableValueError('the value holds a BigInt, which JSON cannot encode');
      case 'object':
        break;
      default:
        return undefined;
    }
    budget.spend(4);
    if (v === null) return null;
    if (level > MAX_VALUE_DEPTH) throw new UnencodableValueError('the value is nested too deeply');
    if (ancestors.has(v)) throw new UnencodableValueError('the value holds a cycle');
    ancestors.add(v);
    let out: unknown;
    if (Array.isArray(v)) {
      out = v.map((item) => copy(item, level + 1) ?? null);
    } else {
      // No prototype: an own `__proto__` key (parsed JSON) is kept like any other.
      const obj = Object.create(null) as Record<string, unknown>;
      for (const key of Object.keys(v)) {
        const item = copy((v as Record<string, unknown>)[key], level + 1);
        if (item === undefined) continue;
        budget.spend(key.length + 3);
        obj[key] = item;
      }
      out = obj;
    }
    ancestors.delete(v);
    return out;
  };
  return copy(value, depth);
}
