import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { SchedulerRegistry } from '@nestjs/schedule';
import { CLEANUP_JOB_NAME } from 'nestjs-pg-idempotency';
import { AppModule } from './app.module';

async function bootstrap() {
  const app = await NestFactory.create(AppModule);
  app.enableShutdownHooks();
  await app.listen(process.env.PORT ?? 3000);
  // Read by test/package/packed-package.e2e.spec.ts.
  const scheduled = app.get(SchedulerRegistry).doesExist('cron', CLEANUP_JOB_NAME);
  console.log(`READY ${await app.getUrl()} cleanup-scheduled=${scheduled}`);
}
bootstrap();
