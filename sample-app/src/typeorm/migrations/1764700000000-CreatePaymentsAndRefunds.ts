import type { MigrationInterface, QueryRunner } from 'typeorm';
import { sampleSchemaSql } from '../../sample-schema.js';

/**
 * The sample's own ledger, `payments` and `refunds`, from the same SQL file as the plain pg
 * flavour. Runs after the library's migration (TypeORM orders migrations by the timestamp in
 * their name). Never `synchronize`.
 */
export class CreatePaymentsAndRefunds1764700000000 implements MigrationInterface {
  name = 'CreatePaymentsAndRefunds1764700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(await sampleSchemaSql());
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS refunds`);
    await queryRunner.query(`DROP TABLE IF EXISTS payments`);
  }
}
