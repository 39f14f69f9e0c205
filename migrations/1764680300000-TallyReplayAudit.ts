import type { MigrationInterface, QueryRunner } from 'typeorm';
import { REPLAY_TALLY_DOWN, REPLAY_TALLY_UP } from './idempotency-replay-tally.sql.js';

/** Replay audit rows per record per flush, with a count; the views sum the counts. */
export class TallyReplayAudit1764680300000 implements MigrationInterface {
  name = 'TallyReplayAudit1764680300000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const statement of REPLAY_TALLY_UP) await queryRunner.query(statement);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const statement of REPLAY_TALLY_DOWN) await queryRunner.query(statement);
  }
}
