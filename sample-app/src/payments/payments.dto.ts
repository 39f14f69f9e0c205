import { IsInt, IsNotEmpty, IsPositive, IsString, Matches, Max, MaxLength } from 'class-validator';

const MAX_AMOUNT = 99_999_999; // fits `integer`; a real service would use bigint + string in JSON

export class CreatePaymentDto {
  /** Positive integer in minor units: 1999 = 19.99. */
  @IsInt()
  @IsPositive()
  @Max(MAX_AMOUNT)
  amount!: number;

  /** ISO 4217 code, three letters (stored lower-case). */
  @IsString()
  @Matches(/^[A-Za-z]{3}$/, { message: 'currency must be a three-letter ISO 4217 code' })
  currency!: string;

  /** Card token. Test tokens: tok_chargeDeclined, tok_slow, tok_fail; anything else succeeds. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  source!: string;
}

export class CreateRefundDto {
  @IsInt()
  @IsPositive()
  @Max(MAX_AMOUNT)
  amount!: number;
}
