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
    ScheduleModule.forRoot(), // runs the cleanup job (the library never imports it itself)
    TypeOrmModule.forRoot({
      type: 'postgres',
      url: process.env.DATABASE_URL,
      migrations: [...idempotencyMigrations], // then your own migrations
      migrationsRun: true, // creates the idempotency tables at start-up; never `synchronize`
    }),
    IdempotencyModule.forRootAsync({
      inject: [DataSource],
      useFactory: (dataSource: DataSource) => ({
        dataSource,
        // Whose request it is (a key is scoped per user). The default reads
        // req.user?.id ?? req.user?.sub ?? req.user?.userId; no req.user = anonymous scope.
        getUserId: (req) => req.user?.id,
      }),
    }),
  ],
  controllers: [PaymentsController],
})
export class AppModule {}
