import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { createMigratedDatabase, type MigratedDatabase } from '../fixtures/migrated-database.js';

// What `import('@nestjs/schedule')` does in an app that never installed it (the package
// test's esm-app shows the same on a real install without it).
jest.unstable_mockModule('@nestjs/schedule', () => {
  throw Object.assign(new Error("Cannot find package '@nestjs/schedule' imported from /app"), {
    code: 'ERR_MODULE_NOT_FOUND',
  });
});
const { IdempotencyModule } = await import('../../lib/index.js');

describe('cleanup.enabled without @nestjs/schedule', () => {
  let db: MigratedDatabase;
  beforeAll(async () => {
    db = await createMigratedDatabase('no_schedule');
  });
  afterAll(async () => db?.drop());

  async function boot(enabled: boolean) {
    @Module({
      imports: [IdempotencyModule.forRoot({ dataSource: db.dataSource, cleanup: { enabled } })],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    try {
      await app.init();
    } finally {
      await app.close();
    }
  }

  it('stops start-up with the real cause and the fix', async () => {
    const failure = boot(true);
    await expect(failure).rejects.toThrow(
      "cleanup.enabled is true but @nestjs/schedule could not be loaded (Cannot find package '@nestjs/schedule' imported from /app)",
    );
    await expect(failure).rejects.toThrow(
      'npm install @nestjs/schedule and import ScheduleModule.forRoot() in the app module, or set cleanup: { enabled: false }',
    );
  });

  it('starts with cleanup off', async () => {
    await expect(boot(false)).resolves.toBeUndefined();
  });
});
