import { STORED_BIGINT, STORED_PARENT, STORED_PARSED, STORED_TYPE } from './graphql-output.js';
import {
  collectFields,
  type GqlInfo,
  type GqlNode,
  type GqlType,
  kindOf,
} from './graphql-schema.js';

/** A leaf already in its sent form, which the schema's patched `serialize` passes through. */
class Serialized {
  constructor(readonly value: unknown) {}

  toJSON(): unknown {
    return this.value;
  }

  toString(): string {
    return String(this.value);
  }
}

/** The object type a replayed object stands for (read by the patched type resolvers). */
const REPLAYED_TYPE = Symbol('nestjs-pg-idempotency:replayed-type');
const patched = new WeakMap<object, Set<string>>();

/**
 * The value a resolver returns on a replay so that GraphQL sends exactly the stored data: objects
 * keyed by field name, enum names turned back into their internal values, and a scalar whose
 * `serialize` would not give the stored output again (a `DateTime` from its own string) wrapped
 * so that its `serialize` passes it through. The query is the first call's (the fingerprint
 * covers the selection), so the stored data has every selected field.
 */
export function replayGraphQLOutput(stored: unknown, info: GqlInfo): unknown {
  return build(info, info.returnType, info.fieldNodes, stored);
}

/** How the mutation returned a leaf: as what its scalar's `parseValue` makes, or as a bigint. */
type Form = 'parsed' | 'bigint' | undefined;

function build(
  info: GqlInfo,
  type: GqlType,
  nodes: readonly GqlNode[],
  stored: unknown,
  form?: Form,
): unknown {
  const kind = kindOf(type);
  if (kind === 'NonNull') return build(info, type.ofType!, nodes, stored, form);
  if (stored === null || stored === undefined) return null;
  switch (kind) {
    case 'List':
      return (stored as unknown[]).map((item) => build(info, type.ofType!, nodes, item, form));
    case 'Scalar':
    case 'Enum':
      return leaf(type, stored, form);
    case 'Interface':
    case 'Union': {
      patchOnce(type, 'resolveType', (value) => (value as Replayed)?.[REPLAYED_TYPE]);
      const concrete = info.schema.getType((stored as Record<string, string>)[STORED_TYPE]);
      return object(info, concrete!, nodes, stored as Record<string, unknown>);
    }
    default:
      return object(info, type, nodes, stored as Record<string, unknown>);
  }
}

type Replayed = Record<string | symbol, unknown>;

function object(
  info: GqlInfo,
  type: GqlType,
  nodes: readonly GqlNode[],
  stored: Record<string, unknown>,
): Replayed {
  patchOnce(type, 'isTypeOf', (value) => {
    const replayed = (value as Replayed)?.[REPLAYED_TYPE];
    return replayed === undefined ? undefined : replayed === type.name;
  });
  const fields = type.getFields!();
  // What a field resolver run again reads on its parent, in the form the handler returned it (an
  // enum's internal value, a `Date`); the selected fields go over it.
  const out: Replayed = { __typename: type.name };
  const parsed = new Set(stored[STORED_PARSED] as string[] | undefined);
  const bigints = new Set(stored[STORED_BIGINT] as string[] | undefined);
  const formOf = (name: string): Form =>
    bigints.has(name) ? 'bigint' : parsed.has(name) ? 'parsed' : undefined;
  for (const [name, value] of Object.entries(stored[STORED_PARENT] ?? {})) {
    out[name] = fields[name] ? build(info, fields[name].type, [], value, formOf(name)) : value;
  }
  Object.defineProperty(out, REPLAYED_TYPE, { value: type.name });
  for (const [key, fieldNodes] of collectFields(info, type, nodes)) {
    const name = fieldNodes[0].name!.value;
    const field = fields[name];
    if (!field || !Object.hasOwn(stored, key)) continue;
    const value = build(info, field.type, fieldNodes, stored[key], formOf(name));
    // Two aliases of one field read the same property: their selections merge.
    out[name] = Object.hasOwn(out, name) ? merge(out[name], value) : value;
  }
  return out;
}

function merge(a: unknown, b: unknown): unknown {
  if (Array.isArray(a) && Array.isArray(b)) return a.map((item, i) => merge(item, b[i]));
  if (!a || !b || typeof a !== 'object' || typeof b !== 'object') return a;
  if (a instanceof Serialized) return a;
  const out = a as Replayed;
  for (const [key, value] of Object.entries(b)) {
    out[key] = Object.hasOwn(out, key) ? merge(out[key], value) : value;
  }
  return out;
}

/**
 * A leaf as the handler returned it, when the schema or the record can say: an enum's internal
 * value; a scalar returned as what its `parseValue` makes (a `Date`), parsed from its sent form;
 * any other scalar as sent (or parsed, if only that gives its sent form again), so that a field
 * resolver run again reads what it read the first time. Each only if it is sent as stored; else a
 * `Serialized` wrapper.
 */
function leaf(type: GqlType, stored: unknown, form: Form): unknown {
  const asSent = () => stored;
  const asParsed = () => parsed(type, stored);
  const candidates =
    kindOf(type) === 'Enum'
      ? [() => type.getValue!(stored as string)?.value]
      : form === 'bigint'
        ? [() => asBigint(asParsed()), asParsed, asSent]
        : form === 'parsed'
          ? [asParsed, asSent]
          : [asSent, asParsed];
  for (const candidate of candidates) {
    const value = candidate();
    if (reproduces(type, value, stored)) return value;
  }
  patchOnce(type, 'serialize', (value) => (value instanceof Serialized ? value : undefined));
  return new Serialized(stored);
}

/** A scalar whose `parseValue` gives a number for a bigint it was returned as (graphql-scalars). */
function asBigint(value: unknown): unknown {
  if (typeof value !== 'number' && typeof value !== 'string') return value;
  try {
    return BigInt(value);
  } catch {
    return value;
  }
}

function parsed(type: GqlType, stored: unknown): unknown {
  try {
    return type.parseValue ? type.parseValue(stored) : stored;
  } catch {
    return stored;
  }
}

function reproduces(type: GqlType, candidate: unknown, stored: unknown): boolean {
  try {
    const out = type.serialize!(candidate);
    return Object.is(out, stored) || JSON.stringify(out) === JSON.stringify(stored);
  } catch {
    return false;
  }
}

/**
 * Wraps one method of a schema type, once: `answer` decides for replayed values (a defined
 * result), everything else goes to the original. A `Serialized` leaf answers with its value.
 * A type without the method is left alone: GraphQL's default then reads `__typename`.
 */
function patchOnce(
  type: GqlType,
  method: 'serialize' | 'resolveType' | 'isTypeOf',
  answer: (value: unknown) => unknown,
): void {
  const target = type as Record<string, unknown>;
  const original = target[method] as ((...args: unknown[]) => unknown) | undefined;
  const methods = patched.get(type) ?? new Set<string>();
  if (!original || methods.has(method)) return;
  patched.set(type, methods.add(method));
  target[method] = function (this: unknown, value: unknown, ...rest: unknown[]) {
    const replayed = answer(value);
    if (replayed instanceof Serialized) return replayed.value;
    if (replayed !== undefined) return replayed;
    return original.call(this, value, ...rest);
  };
}
