// The README's quick start, in the app `nest new` (Nest 12 CLI) generates: ES modules, vitest.
import { Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyModule } from 'nestjs-pg-idempotency';
import { idempotencyMigrations } from 'nestjs-pg-idempotency/migrations';
import { DataSource } from 'typeorm';
import { PaymentsController } from './payments.controller.js';

@Module({
  imports: [
    ScheduleModule.forRoot(), // runs the cleanup job (the library never imports it itself)
    TypeOrmModule.forRoot({
      type: 'postgres',
      url: process.env.DATABASE_URL,
      migrations: [...idempotencyMigrations], // then your own migrations
      migrationsRun: true, // creates the idempotency tables at start-up; never `synchronize`
    }),
    IdempotencyModule.forRootAsync({
      inject: [DataSource],
      // Keys are scoped per user: the default getUserId reads req.user?.id ?? req.user?.sub
      // ?? req.user?.userId (a user entity, a JWT payload); no req.user = the anonymous scope.
      useFactory: (dataSource: DataSource) => ({ dataSource }),
    }),
  ],
  controllers: [PaymentsController],
})
export class AppModule {}
