// No @nestjs/typeorm, no @nestjs/schedule (not even installed): cleanup is off, and
// `isGlobal: false` makes the module visible only where it is imported, next to the controller.
import { Module } from '@nestjs/common';
import { IdempotencyModule } from 'nestjs-pg-idempotency';
import { idempotencyMigrations } from 'nestjs-pg-idempotency/migrations';
import { DataSource } from 'typeorm';
import { CreatePayments1900000000000, PaymentEntity } from './payment.entity.js';
import { PaymentsController } from './payments.controller.js';

@Module({
  imports: [
    IdempotencyModule.forRoot({
      isGlobal: false,
      dataSource: new DataSource({
        type: 'postgres',
        url: process.env.DATABASE_URL,
        entities: [PaymentEntity],
        migrations: [...idempotencyMigrations, CreatePayments1900000000000],
        migrationsRun: true,
      }),
      // CLEANUP=on: what an app that forgot @nestjs/schedule gets (the test expects start-up to stop).
      cleanup: { enabled: process.env.CLEANUP === 'on' },
    }),
  ],
  controllers: [PaymentsController],
})
export class PaymentsModule {}
