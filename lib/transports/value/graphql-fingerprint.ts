import type { GqlInfo, GqlNode } from './graphql-schema.js';

/**
 * What a GraphQL mutation's fingerprint covers: its arguments, its selection (fragments it uses
 * included, whitespace and the field's own alias not) and the values of the variables the
 * selection refers to. The stored value is the selected data, so a retry asking for other
 * fields is another request.
 */
export function graphqlFingerprintInput(info: GqlInfo | undefined, args: unknown): unknown {
  if (!info?.fieldNodes) return args;
  const variables = new Set<string>();
  const fragments = new Map<string, unknown>();
  const shape = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(shape);
    if (node === null || typeof node !== 'object') return node;
    const ast = node as GqlNode;
    if (ast.kind === 'Variable') variables.add(ast.name!.value);
    if (ast.kind === 'FragmentSpread') spread(ast.name!.value);
    const out: Record<string, unknown> = {};
    // `loc` holds positions (whitespace) and the token list.
    for (const [key, value] of Object.entries(ast)) if (key !== 'loc') out[key] = shape(value);
    return out;
  };
  const spread = (name: string): void => {
    if (fragments.has(name)) return;
    fragments.set(name, null);
    fragments.set(name, shape(info.fragments[name]));
  };
  const selection = info.fieldNodes.map((node) => shape({ ...node, alias: undefined }));
  return {
    args,
    selection,
    fragments: [...fragments.keys()].sort().map((name) => [name, fragments.get(name)]),
    variables: [...variables].sort().map((name) => [name, info.variableValues?.[name] ?? null]),
  };
}
