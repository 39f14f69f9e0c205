/** jest globalTeardown: stops the embedded server / container that globalSetup started. */
import type { PostgresSource } from './postgres-source.js';

const PG_SOURCE_KEY = Symbol.for('nestjs-pg-idempotency.test.postgres'); // as in global-setup.ts

export default async function globalTeardown(): Promise<void> {
  const store = globalThis as Record<symbol, unknown>;
  const postgres = store[PG_SOURCE_KEY] as PostgresSource | undefined;
  delete store[PG_SOURCE_KEY];
  await postgres?.stop();
}
