import {
  createUnionType,
  Field,
  GraphQLISODateTime,
  GraphQLTimestamp,
  ID,
  Int,
  ObjectType,
} from '@nestjs/graphql';
import { registerEnumType } from '@nestjs/graphql';
import { GraphQLScalarType } from 'graphql';
import { GraphQLBigInt, GraphQLJSON } from 'graphql-scalars';

/** Internal values differ from the names GraphQL sends. */
export enum PaymentStatus {
  Settled = 'settled',
  Pending = 'pending',
}
registerEnumType(PaymentStatus, { name: 'PaymentStatus' });

/** A custom scalar whose output it cannot read back: serialize('EUR 0.05') is not 'EUR 0.05'. */
export const Money = new GraphQLScalarType({
  name: 'Money',
  serialize: (cents) => `EUR ${(Number(cents) / 100).toFixed(2)}`,
  parseValue: (text) => Math.round(Number(String(text).slice(4)) * 100),
});

/** A scalar that hands out what JSON cannot hold. */
export const RawBigInt = new GraphQLScalarType({ name: 'RawBigInt', serialize: (v) => v });

@ObjectType()
export class Line {
  @Field()
  label!: string;

  @Field(() => Int, { nullable: true })
  qty?: number | null;
}

@ObjectType()
export class Account {
  @Field(() => ID)
  id!: string;

  @Field(() => [Payment])
  payments!: Payment[];
}

@ObjectType()
export class Payment {
  @Field(() => ID)
  id!: string;

  @Field(() => GraphQLBigInt)
  amount!: bigint;

  @Field(() => GraphQLBigInt)
  small!: bigint;

  @Field(() => Money)
  price!: number;

  @Field(() => GraphQLISODateTime)
  createdAt!: Date;

  @Field(() => GraphQLTimestamp)
  settledAt!: Date;

  @Field(() => GraphQLJSON)
  meta!: unknown;

  @Field(() => PaymentStatus)
  status!: PaymentStatus;

  @Field(() => [[String]])
  tags!: string[][];

  @Field(() => [Line], { nullable: 'itemsAndList' })
  lines?: (Line | null)[] | null;

  @Field(() => String, { nullable: true })
  note?: string | null;

  @Field(() => Account)
  account?: Account;

  @Field(() => RawBigInt, { nullable: true })
  raw?: bigint;
}

@ObjectType()
export class Ledger {
  @Field(() => Int)
  id!: number;

  @Field(() => Int)
  amount!: number;
}

@ObjectType()
export class Declined {
  @Field()
  reason!: string;

  @Field(() => GraphQLISODateTime)
  at!: Date;
}

/** An abstract type with its own resolveType, as Nest's code-first unions have. */
export const Attempt = createUnionType({
  name: 'Attempt',
  types: () => [Payment, Declined] as const,
  resolveType: (value: object) => ('reason' in value ? Declined : Payment),
});
