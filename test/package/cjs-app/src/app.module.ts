// The README's quick start, as an npm user writes it.
import { Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyModule } from 'nestjs-pg-idempotency';
import { idempotencyMigrations } from 'nestjs-pg-idempotency/migrations';
import { DataSource } from 'typeorm';
import { PaymentsController } from './payments.controller';

@Module({
  imports: [
    ScheduleModule.forRoot(),
    TypeOrmModule.forRoot({
      type: 'postgres',
      url: process.env.DATABASE_URL,
      migrations: [...idempotencyMigrations],
      migrationsRun: true,
    }),
    IdempotencyModule.forRootAsync({
      inject: [DataSource],
      useFactory: (dataSource: DataSource) => ({
        dataSource,
        getUserId: (req) => req.user?.id,
      }),
    }),
  ],
  controllers: [PaymentsController],
})
export class AppModule {}
