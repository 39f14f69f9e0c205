import { UnencodableValueError } from './json-value.js';

/**
 * The few parts of graphql-js's schema and AST the value encoding reads, typed structurally and
 * told apart by `Symbol.toStringTag`: no import of `graphql`, which the app may load as another
 * module instance (CJS and ESM), where `instanceof` would fail.
 */
export interface GqlType {
  name?: string;
  ofType?: GqlType;
  serialize?(value: unknown): unknown;
  parseValue?(value: unknown): unknown;
  getFields?(): Record<string, GqlField>;
  getValue?(name: string): { value: unknown } | undefined;
  resolveType?: (...args: unknown[]) => unknown;
  isTypeOf?: (...args: unknown[]) => unknown;
}

export interface GqlField {
  name: string;
  type: GqlType;
  resolve?: unknown;
}

export interface GqlNode {
  kind: string;
  name?: { value: string };
  alias?: { value: string };
  selectionSet?: { selections: GqlNode[] };
  typeCondition?: { name: { value: string } };
  directives?: readonly GqlNode[];
  arguments?: readonly { name: { value: string }; value: GqlNode }[];
  value?: unknown;
}

export interface GqlSchema {
  getType(name: string): GqlType | undefined;
  getMutationType(): GqlType | null | undefined;
  isSubType(abstract: GqlType, maybeSub: GqlType): boolean;
}

/** The part of `GraphQLResolveInfo` needed to walk a field's selection. */
export interface GqlInfo {
  fieldName: string;
  fieldNodes: readonly GqlNode[];
  returnType: GqlType;
  parentType: GqlType;
  schema: GqlSchema;
  fragments: Record<string, GqlNode>;
  variableValues: Record<string, unknown>;
  operation?: { operation?: string };
}

export type Kind = 'NonNull' | 'List' | 'Object' | 'Scalar' | 'Enum' | 'Interface' | 'Union';

export function kindOf(type: GqlType): Kind | undefined {
  const tag = (type as { [Symbol.toStringTag]?: string })[Symbol.toStringTag];
  return tag?.startsWith('GraphQL') ? (tag.slice(7).replace('Type', '') as Kind) : undefined;
}

/** A root mutation field, the only fields whose outcome is deduplicated. */
export function isMutationField(info: GqlInfo | undefined): boolean {
  if (!info?.schema || !info.parentType) return false;
  return info.parentType === info.schema.getMutationType();
}

/** The fields selected on an object type, by response key (aliases, fragments, @skip/@include). */
export function collectFields(
  info: GqlInfo,
  objectType: GqlType,
  nodes: readonly GqlNode[],
): Map<string, GqlNode[]> {
  const fields = new Map<string, GqlNode[]>();
  const seen = new Set<string>();
  const visit = (selections: readonly GqlNode[]): void => {
    for (const node of selections) {
      if (!included(info, node)) continue;
      if (node.kind === 'Field') {
        const key = node.alias?.value ?? node.name!.value;
        fields.set(key, [...(fields.get(key) ?? []), node]);
      } else if (node.kind === 'InlineFragment') {
        if (applies(info, objectType, node)) visit(node.selectionSet!.selections);
      } else if (node.kind === 'FragmentSpread') {
        const name = node.name!.value;
        const fragment = info.fragments[name];
        if (seen.has(name) || !fragment || !applies(info, objectType, fragment)) continue;
        seen.add(name);
        visit(fragment.selectionSet!.selections);
      }
    }
  };
  for (const node of nodes) if (node.selectionSet) visit(node.selectionSet.selections);
  return fields;
}

function applies(info: GqlInfo, objectType: GqlType, node: GqlNode): boolean {
  const condition = node.typeCondition?.name.value;
  if (!condition || condition === objectType.name) return true;
  const type = info.schema.getType(condition);
  const kind = type && kindOf(type);
  return (kind === 'Interface' || kind === 'Union') && info.schema.isSubType(type!, objectType);
}

/** `@skip(if:)` and `@include(if:)`, with a literal or a variable. */
function included(info: GqlInfo, node: GqlNode): boolean {
  for (const directive of node.directives ?? []) {
    const name = directive.name?.value;
    if (name !== 'skip' && name !== 'include') continue;
    const arg = directive.arguments?.find((a) => a.name.value === 'if')?.value;
    const value =
      arg?.kind === 'Variable' ? info.variableValues[arg.name!.value] : (arg?.value ?? false);
    if ((name === 'skip') === Boolean(value)) return false;
  }
  return true;
}

/**
 * The object type a value of an interface or union is: its `__typename`, else the type's own
 * `resolveType` when it answers synchronously. Anything else cannot be stored.
 */
export function concreteType(info: GqlInfo, type: GqlType, value: unknown): GqlType {
  let name: unknown = (value as { __typename?: unknown }).__typename;
  if (typeof name !== 'string' && type.resolveType) {
    try {
      name = type.resolveType(value, undefined, info, type);
    } catch {
      name = undefined;
    }
    if (name && typeof name === 'object') name = (name as GqlType).name;
  }
  const concrete = typeof name === 'string' ? info.schema.getType(name) : undefined;
  if (!concrete || kindOf(concrete) !== 'Object') {
    throw new UnencodableValueError(
      `cannot tell the concrete type of a ${type.name} synchronously`,
    );
  }
  return concrete;
}
