import type { MigrationInterface, QueryRunner } from 'typeorm';
import { IDEMPOTENCY_AUDIT_DOWN, IDEMPOTENCY_AUDIT_UP } from './idempotency-audit.sql.js';

/** Archive, replay events, cleanup runs and the reconciliation views. */
export class CreateIdempotencyAudit1764680100000 implements MigrationInterface {
  name = 'CreateIdempotencyAudit1764680100000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of IDEMPOTENCY_AUDIT_UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of IDEMPOTENCY_AUDIT_DOWN) await queryRunner.query(statement);
  }
}
