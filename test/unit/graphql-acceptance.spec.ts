import { describe, expect, it } from '@jest/globals';
import { buildSchema, type FieldNode, type FragmentDefinitionNode, Kind, parse } from 'graphql';
import { graphqlAccepts, type FieldInfo } from '../../lib/transports/value/graphql-acceptance.js';

const schema = buildSchema(`
  enum State { OK, DECLINED }
  interface Node { id: ID! }
  type Card implements Node { id: ID!, last4: String! }
  type Bank implements Node { id: ID!, iban: String! }
  union Source = Card | Bank
  type Charge { id: ID!, state: State!, amounts: [Int!]!, source: Source, node: Node }
  type Query { charge: Charge! }
`);

/** What a resolver of `Query.charge` gets as `info` for this query. */
function infoFor(query: string): FieldInfo {
  const document = parse(query);
  const operation = document.definitions.find((d) => d.kind === Kind.OPERATION_DEFINITION)!;
  const fragments = Object.fromEntries(
    document.definitions
      .filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION)
      .map((d) => [d.name.value, d]),
  );
  return {
    returnType: schema.getQueryType()!.getFields().charge.type,
    fieldNodes: operation.selectionSet.selections as FieldNode[],
    fragments,
    schema,
  } as unknown as FieldInfo;
}

const base = { id: 'ch_1', state: 'OK', amounts: [1, 2] };
const accepts = (value: unknown, query: string) => graphqlAccepts(value, infoFor(query), {});

describe('graphqlAccepts', () => {
  it('checks non-null, lists, enums and scalars over the selected fields', async () => {
    const query = '{ charge { id state amounts } }';
    expect(await accepts(base, query)).toBe(true);
    expect(await accepts(null, query)).toBe(false);
    expect(await accepts({ ...base, state: 'LOST' }, query)).toBe(false);
    expect(await accepts({ ...base, amounts: [1, 'x'] }, query)).toBe(false);
    expect(await accepts({ ...base, amounts: 3 }, query)).toBe(false);
    // Not selected: not checked.
    expect(await accepts({ ...base, state: 'LOST' }, '{ charge { id } }')).toBe(true);
  });

  it('resolves unions and interfaces by __typename, through fragments', async () => {
    const query = `{ charge { source { ... on Card { last4 } ...bank } node { id } } }
      fragment bank on Bank { iban }`;
    const card = { __typename: 'Card', id: 'c', last4: '4242' };
    expect(await accepts({ ...base, source: card, node: card }, query)).toBe(true);
    expect(await accepts({ ...base, source: { ...card, last4: null } }, query)).toBe(false);
    expect(await accepts({ ...base, source: { __typename: 'Bank', iban: 5 } }, query)).toBe(true);
    expect(await accepts({ ...base, source: { __typename: 'Bank', iban: {} } }, query)).toBe(false);
    // A plain object GraphQL cannot resolve to a member type.
    expect(await accepts({ ...base, source: { id: 'c', last4: '4242' } }, query)).toBe(false);
  });
});
