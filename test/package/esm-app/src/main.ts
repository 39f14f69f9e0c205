import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { PaymentsModule } from './payments.module.js';

@Module({ imports: [PaymentsModule] })
class AppModule {}

const app = await NestFactory.create(AppModule);
app.enableShutdownHooks();
await app.listen(process.env.PORT ?? 3000);
// Read by test/package/packed-package.e2e.spec.ts.
console.log(`READY ${await app.getUrl()}`);
