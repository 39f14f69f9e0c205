import type { MigrationInterface, QueryRunner } from 'typeorm';
import { IDEMPOTENCY_KEYS_DOWN, IDEMPOTENCY_KEYS_UP } from './idempotency-keys.sql.js';

/** Creates `idempotency_keys`. Add it to your DataSource's `migrations`. */
export class CreateIdempotencyKeys1764680000000 implements MigrationInterface {
  name = 'CreateIdempotencyKeys1764680000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of IDEMPOTENCY_KEYS_UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of IDEMPOTENCY_KEYS_DOWN) await queryRunner.query(statement);
  }
}
