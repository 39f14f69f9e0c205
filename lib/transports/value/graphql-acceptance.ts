/**
 * Whether GraphQL will accept a replayed value for a field: what graphql-js checks when it
 * completes the value (non-null, lists, scalar and enum serialization, abstract type resolution,
 * `isTypeOf`), over the selected fields the value holds. Resolvers are never run here (they may
 * have effects; servers such as Apollo wrap every field's, so a default one cannot be told
 * apart): a selected field the value does not hold, or holds as a function, is taken as
 * accepted. Typed by shape: `graphql` is not a dependency.
 */
type GqlType = {
  name?: string;
  ofType?: GqlType;
  serialize?: (value: unknown) => unknown;
  resolveType?: (...args: unknown[]) => unknown;
  isTypeOf?: (...args: unknown[]) => unknown;
  getFields?: () => Record<string, { type: GqlType }>;
  getInterfaces?: () => { name: string }[];
  toString(): string;
};
interface Selection {
  kind: string;
  name?: { value: string };
  typeCondition?: { name: { value: string } };
  selectionSet?: { selections: Selection[] };
}
export interface FieldInfo {
  returnType: GqlType;
  fieldNodes: readonly Selection[];
  fragments: Record<string, { typeCondition: { name: { value: string } } } & Selection>;
  schema: {
    getType(name: string): GqlType | undefined;
    getPossibleTypes(type: GqlType): readonly GqlType[];
  };
}

export async function graphqlAccepts(value: unknown, info: FieldInfo, context: unknown) {
  const check = async (type: GqlType, v: unknown, selections: Selection[]): Promise<boolean> => {
    const nonNull = type.ofType !== undefined && String(type).endsWith('!');
    if (v === null || v === undefined) return !nonNull;
    if (nonNull) return check(type.ofType as GqlType, v, selections);
    if (type.ofType !== undefined) {
      if (!Array.isArray(v)) return false;
      for (const item of v) if (!(await check(type.ofType, item, selections))) return false;
      return true;
    }
    if (typeof type.serialize === 'function') {
      try {
        return type.serialize(v) !== undefined;
      } catch {
        return false;
      }
    }
    let concrete: GqlType | undefined = type;
    if ('resolveType' in type) concrete = await resolveAbstract(type, v);
    if (!concrete?.getFields) return false;
    if (concrete.isTypeOf && !(await concrete.isTypeOf(v, context, info))) return false;
    const fields = concrete.getFields();
    for (const node of collect(concrete, selections)) {
      const name = node.name?.value as string;
      const field = fields[name];
      const held = Object.prototype.hasOwnProperty.call(v, name);
      const own = (v as Record<string, unknown>)[name];
      if (!field || !held || typeof own === 'function') continue;
      if (!(await check(field.type, own, node.selectionSet?.selections ?? []))) return false;
    }
    return true;
  };

  const resolveAbstract = async (type: GqlType, v: unknown) => {
    const name = type.resolveType
      ? await type.resolveType(v, context, info, type)
      : (v as { __typename?: unknown }).__typename;
    if (typeof name === 'string') return info.schema.getType(name);
    for (const candidate of info.schema.getPossibleTypes(type)) {
      if (await candidate.isTypeOf?.(v, context, info)) return candidate;
    }
    return undefined;
  };

  /** The field selections that apply to `type`, through fragments, `__typename` aside. */
  const collect = (type: GqlType, selections: Selection[]): Selection[] =>
    selections.flatMap((s) => {
      if (s.kind === 'Field') return s.name?.value === '__typename' ? [] : [s];
      const fragment = s.kind === 'FragmentSpread' ? info.fragments[s.name!.value] : s;
      const on = fragment?.typeCondition?.name.value;
      const applies =
        on === undefined || on === type.name || !!type.getInterfaces?.().some((i) => i.name === on);
      return applies ? collect(type, fragment?.selectionSet?.selections ?? []) : [];
    });

  try {
    const selections = info.fieldNodes.flatMap((n) => n.selectionSet?.selections ?? []);
    return await check(info.returnType, value, selections);
  } catch {
    // A check that cannot run is no reason to call a replay failed.
    return true;
  }
}
