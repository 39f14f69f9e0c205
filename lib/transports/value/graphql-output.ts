import {
  collectFields,
  type GqlField,
  type GqlInfo,
  type GqlNode,
  type GqlType,
  concreteType,
  kindOf,
} from './graphql-schema.js';
import {
  EncodeBudget,
  MAX_VALUE_DEPTH,
  plainJson,
  UnencodableValueError,
  ValueTooLargeError,
} from './json-value.js';

/** Where an abstract type's concrete type is kept in a stored value: no GraphQL name has a `#`. */
export const STORED_TYPE = '#type';
/** The parent's other scalar fields, kept for the field resolvers a replay runs again. */
export const STORED_PARENT = '#parent';
/**
 * The scalar fields (selected, or kept in `STORED_PARENT`) the mutation returned as what their
 * `parseValue` makes (a `Date`): a replay parses them back for the field resolvers that read them.
 * Names only: a value the schema did not send (a masked card number) is never stored.
 */
export const STORED_PARSED = '#parsed';
/** Likewise the scalar fields returned as a bigint (graphql-scalars' `BigInt` sends a number). */
export const STORED_BIGINT = '#bigint';

/** The names of the leaves returned as what `parseValue` makes, by the form they were in. */
interface Forms {
  parsed: string[];
  bigint: string[];
}

/**
 * What GraphQL sends for a mutation's returned value: only the selected fields, each through its
 * type's own `serialize` (scalars, enums), lists and nulls as the schema says. A field the
 * returned object does not have but a resolver computes (`@ResolveField`) is not in it: that
 * resolver runs again on a replay, on a parent holding the stored fields and the parent's
 * other scalars (Nest gives every field a resolver, so having one says nothing).
 * Synchronous and bounded: cycles in the returned graph are never followed past the selection,
 * and the work stops at `maxBytes` of output. Throws `UnencodableValueError`.
 */
export function encodeGraphQLOutput(value: unknown, info: GqlInfo, maxBytes: number): unknown {
  return new OutputWalk(info, new EncodeBudget(maxBytes)).complete(
    info.returnType,
    info.fieldNodes,
    value,
    0,
  );
}

class OutputWalk {
  constructor(
    private readonly info: GqlInfo,
    private readonly budget: EncodeBudget,
  ) {}

  complete(type: GqlType, nodes: readonly GqlNode[], value: unknown, depth: number): unknown {
    const kind = kindOf(type);
    if (kind === 'NonNull') {
      const out = this.complete(type.ofType!, nodes, value, depth);
      if (out === null)
        throw new UnencodableValueError(`a non-null ${type.ofType!.name ?? 'value'} is null`);
      return out;
    }
    if (value === null || value === undefined) {
      this.budget.spend(4);
      return null;
    }
    if (depth > MAX_VALUE_DEPTH) throw new UnencodableValueError('the value is nested too deeply');
    if (value instanceof Error || typeof value === 'function' || isThenable(value)) {
      throw new UnencodableValueError('a selected field holds an error, a function or a promise');
    }
    switch (kind) {
      case 'List':
        if (
          typeof (value as Iterable<unknown>)[Symbol.iterator] !== 'function' ||
          typeof value === 'string'
        ) {
          throw new UnencodableValueError('a list field holds something that is not a list');
        }
        return Array.from(value as Iterable<unknown>, (item) =>
          this.complete(type.ofType!, nodes, item, depth + 1),
        );
      case 'Scalar':
      case 'Enum':
        return this.leaf(type, value, depth);
      case 'Object':
        return this.object(type, nodes, value, depth, false);
      case 'Interface':
      case 'Union':
        return this.object(concreteType(this.info, type, value), nodes, value, depth, true);
      default:
        throw new UnencodableValueError(`unknown GraphQL type ${String(type)}`);
    }
  }

  private leaf(type: GqlType, value: unknown, depth: number): unknown {
    let out: unknown;
    try {
      out = type.serialize!(value);
    } catch (err) {
      throw new UnencodableValueError(`${type.name}.serialize failed: ${(err as Error)?.message}`);
    }
    if (out === null || out === undefined) {
      throw new UnencodableValueError(`${type.name}.serialize returned no value`);
    }
    return plainJson(out, this.budget, depth);
  }

  private object(
    type: GqlType,
    nodes: readonly GqlNode[],
    source: unknown,
    depth: number,
    abstract: boolean,
  ): Record<string, unknown> {
    const fields = type.getFields!();
    // No prototype: a `__proto__` alias is a key like any other, as in graphql-js's own result.
    const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    if (abstract) out[STORED_TYPE] = type.name;
    const selected = collectFields(this.info, type, nodes);
    const forms: Forms = { parsed: [], bigint: [] };
    let resolved = false;
    for (const [key, fieldNodes] of selected) {
      const name = fieldNodes[0].name!.value;
      this.budget.spend(key.length + 3);
      if (name === '__typename') {
        out[key] = type.name;
        continue;
      }
      const field = fields[name];
      if (!field) continue;
      const raw = (source as Record<string, unknown>)[name];
      // Not on the returned object but resolved (`@ResolveField`): its resolver answers, on
      // every replay again, from the stored parent.
      if (raw === undefined && field.resolve) {
        resolved = true;
        continue;
      }
      out[key] = this.complete(field.type, fieldNodes, raw, depth + 1);
      noteForm(forms, name, field.type, raw);
    }
    if (resolved) out[STORED_PARENT] = this.parentLeaves(fields, selected, source, depth, forms);
    if (forms.parsed.length > 0) out[STORED_PARSED] = forms.parsed;
    if (forms.bigint.length > 0) out[STORED_BIGINT] = forms.bigint;
    return out;
  }

  /**
   * The scalar and enum fields (and lists of them) a field resolver may read on its parent (its
   * `id`...), unselected; a null as null.
   */
  private parentLeaves(
    fields: Record<string, GqlField>,
    selected: Map<string, GqlNode[]>,
    source: unknown,
    depth: number,
    forms: Forms,
  ): Record<string, unknown> {
    const names = new Set([...selected.values()].map((nodes) => nodes[0].name!.value));
    const leaves: Record<string, unknown> = {};
    for (const field of Object.values(fields)) {
      const kind = kindOf(leafType(field.type));
      if (names.has(field.name) || (kind !== 'Scalar' && kind !== 'Enum')) continue;
      const raw = (source as Record<string, unknown>)[field.name];
      if (raw === undefined) continue;
      try {
        leaves[field.name] = raw === null ? null : this.complete(field.type, [], raw, depth + 1);
        noteForm(forms, field.name, field.type, raw);
      } catch (err) {
        if (err instanceof ValueTooLargeError) throw err;
      }
    }
    return leaves;
  }
}

/** A field's type without its non-null and list wrappers. */
function leafType(type: GqlType): GqlType {
  const kind = kindOf(type);
  return kind === 'NonNull' || kind === 'List' ? leafType(type.ofType!) : type;
}

/** Notes a scalar leaf (or list of them) returned as what its `parseValue` makes: a `Date`, a bigint. */
function noteForm(forms: Forms, name: string, type: GqlType, raw: unknown): void {
  if (kindOf(leafType(type)) !== 'Scalar') return;
  const item = Array.isArray(raw) ? raw.find((x) => x !== null && x !== undefined) : raw;
  const form =
    typeof item === 'bigint'
      ? forms.bigint
      : typeof item === 'object' && item !== null
        ? forms.parsed
        : undefined;
  if (form && !form.includes(name)) form.push(name);
}

function isThenable(value: unknown): boolean {
  return typeof (value as { then?: unknown })?.then === 'function';
}
