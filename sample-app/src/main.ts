import 'reflect-metadata';
import { Logger, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { AppModule, configureApp } from './app.module.js';
import { startDatabase, type SampleDatabase } from './database.js';
import { ormFromEnv, slowMsFromEnv } from './sample.options.js';
import { startPrometheus } from './telemetry.js';

const logger = new Logger('SampleApp');
let db: SampleDatabase | undefined;
let app: INestApplication | undefined;
let shuttingDown = false;

/** Close HTTP and the connection pool first, then stop the embedded PostgreSQL (if any). */
async function shutdown(reason: string, code: number): Promise<never> {
  if (shuttingDown) {
    logger.warn(`${reason} again: exiting without waiting`);
    process.exit(1);
  }
  shuttingDown = true;
  logger.log(`${reason}: shutting down`);
  try {
    await app?.close();
  } catch (error) {
    logger.error(`closing the app failed: ${(error as Error).message}`);
  }
  try {
    await db?.stop();
    if (db?.source === 'embedded') logger.log('Embedded PostgreSQL stopped');
  } catch (error) {
    logger.error(`stopping PostgreSQL failed: ${(error as Error).message}`);
    code ||= 1;
  }
  process.exit(code);
}

// Installed before anything starts, so a signal during start-up still stops what was started.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => void shutdown(signal, 0));
}

async function bootstrap(): Promise<void> {
  const port = Number(process.env.PORT ?? 3000);
  const host = process.env.HOST ?? '127.0.0.1';
  await startPrometheus(logger);
  const orm = ormFromEnv();
  db = await startDatabase((message) => logger.log(message));
  logger.log(`Database: ${db.description}`);
  logger.log(`Data access: ${orm === 'pg' ? 'plain pg (SAMPLE_ORM=typeorm: TypeORM)' : 'TypeORM'}`);

  app = configureApp(
    await NestFactory.create(
      AppModule.forRoot({
        databaseUrl: db.url,
        orm,
        slowMs: slowMsFromEnv(),
        logSql: process.env.SAMPLE_LOG_SQL === '1',
      }),
      {
        abortOnError: false, // throw instead of process.exit(1), so shutdown() can stop PostgreSQL
      },
    ),
  );
  await app.listen(port, host);

  const base = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const body = JSON.stringify({ amount: 1999, currency: 'eur', source: 'tok_visa' });
  console.log(
    [
      '',
      `Payments sample listening on ${base}`,
      'Try it (run it twice: the second answer is replayed, with Idempotent-Replayed: true):',
      '',
      `  curl -i -X POST ${base}/payments -H 'Authorization: Bearer alice' -H 'Idempotency-Key: ${randomUUID()}' -H 'Content-Type: application/json' -d '${body}'`,
      '',
      'Ctrl-C stops the app (and the embedded PostgreSQL). See sample-app/README.md for more.',
      '',
    ].join('\n'),
  );
}

bootstrap().catch((error: Error) => {
  logger.error(`Start-up failed: ${error.stack ?? error.message}`);
  void shutdown('start-up failure', 1);
});
