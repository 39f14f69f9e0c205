import type { MigrationInterface, QueryRunner } from 'typeorm';
import { FINANCE_HISTORY_DOWN, FINANCE_HISTORY_UP } from './idempotency-finance-history.sql.js';

/** Daily roll-up of deleted rows (stable daily figures) and refusals counted per record and day. */
export class KeepFinanceHistory1764680400000 implements MigrationInterface {
  name = 'KeepFinanceHistory1764680400000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of FINANCE_HISTORY_UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of FINANCE_HISTORY_DOWN) await queryRunner.query(statement);
  }
}
