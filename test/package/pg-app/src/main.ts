// A service on its own pg pool, no TypeORM: the library's tables by `migrate(pool)`, the app's by
// its own SQL. Shared by drizzle-app and prisma-app, which bring their own payments.tool.ts.
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { IdempotencyModule, migrate } from 'nestjs-pg-idempotency';
import pg from 'pg';
import { PaymentsController } from './payments.controller.js';
import { transactions } from './payments.tool.js';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
await migrate(pool);
await pool.query(
  'CREATE TABLE IF NOT EXISTS payments (id text PRIMARY KEY, amount integer NOT NULL)',
);

@Module({
  // Cleanup off: a minimal app without @nestjs/schedule (esm-app covers what forgetting it does).
  imports: [IdempotencyModule.forRoot({ pool, transactions, cleanup: { enabled: false } })],
  controllers: [PaymentsController],
})
class AppModule {}

const app = await NestFactory.create(AppModule);
app.enableShutdownHooks();
await app.listen(process.env.PORT ?? 3000);
// Read by test/package/packed-package.e2e.spec.ts.
console.log(`READY ${await app.getUrl()}`);
