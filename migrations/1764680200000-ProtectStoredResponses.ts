import type { MigrationInterface, QueryRunner } from 'typeorm';
import {
  RESPONSE_PROTECTION_DOWN,
  RESPONSE_PROTECTION_UP,
} from './idempotency-response-protection.sql.js';

/** Key id and digest columns for encrypted and digest-only responses (records and archive). */
export class ProtectStoredResponses1764680200000 implements MigrationInterface {
  name = 'ProtectStoredResponses1764680200000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of RESPONSE_PROTECTION_UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of RESPONSE_PROTECTION_DOWN) await queryRunner.query(statement);
  }
}
