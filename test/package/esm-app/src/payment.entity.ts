// The app's own table, through TypeORM: an entity and a migration that runs after the library's.
import { EntitySchema, type MigrationInterface, type QueryRunner } from 'typeorm';

export interface Payment {
  id: string;
  amount: number;
}

export const PaymentEntity = new EntitySchema<Payment>({
  name: 'Payment',
  tableName: 'payments',
  columns: { id: { type: 'text', primary: true }, amount: { type: 'integer' } },
});

export class CreatePayments1900000000000 implements MigrationInterface {
  name = 'CreatePayments1900000000000';
  async up(runner: QueryRunner): Promise<void> {
    await runner.query('CREATE TABLE payments (id text PRIMARY KEY, amount integer NOT NULL)');
  }
  async down(runner: QueryRunner): Promise<void> {
    await runner.query('DROP TABLE payments');
  }
}
