import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The sample's own ledger: `payments` and `refunds`. Runs after the library's migration
 * (TypeORM orders migrations by the timestamp in their name). Never `synchronize`.
 */
export class CreatePaymentsAndRefunds1764700000000 implements MigrationInterface {
  name = 'CreatePaymentsAndRefunds1764700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE payments (
        id              text        PRIMARY KEY,
        user_id         text        NOT NULL,
        amount          integer     NOT NULL CONSTRAINT payments_amount_positive CHECK (amount > 0),
        currency        char(3)     NOT NULL,
        source          text        NOT NULL,
        status          text        NOT NULL
                        CONSTRAINT payments_status_check
                        CHECK (status IN ('succeeded', 'declined', 'partially_refunded', 'refunded')),
        amount_refunded integer     NOT NULL DEFAULT 0,
        failure_code    text,
        created_at      timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT payments_refund_bounds CHECK (amount_refunded BETWEEN 0 AND amount)
      )`);
    await queryRunner.query(
      `CREATE INDEX idx_payments_user_created ON payments (user_id, created_at DESC)`,
    );
    await queryRunner.query(`
      CREATE TABLE refunds (
        id         text        PRIMARY KEY,
        payment_id text        NOT NULL REFERENCES payments (id),
        user_id    text        NOT NULL,
        amount     integer     NOT NULL CONSTRAINT refunds_amount_positive CHECK (amount > 0),
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(`CREATE INDEX idx_refunds_payment ON refunds (payment_id)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS refunds`);
    await queryRunner.query(`DROP TABLE IF EXISTS payments`);
  }
}
