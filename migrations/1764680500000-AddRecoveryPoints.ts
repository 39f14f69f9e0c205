import type { MigrationInterface, QueryRunner } from 'typeorm';
import { RECOVERY_POINTS_DOWN, RECOVERY_POINTS_UP } from './idempotency-recovery-points.sql.js';

/** Recovery points of `ctx.step()` (`<table>_steps`) and the runs a record took (`runs`). */
export class AddRecoveryPoints1764680500000 implements MigrationInterface {
  name = 'AddRecoveryPoints1764680500000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of RECOVERY_POINTS_UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of RECOVERY_POINTS_DOWN) await queryRunner.query(statement);
  }
}
