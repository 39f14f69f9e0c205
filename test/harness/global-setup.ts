/**
 * jest globalSetup: makes sure a PostgreSQL server is reachable and exports its
 * admin URL as DATABASE_URL, which the jest workers (started afterwards) inherit.
 *
 * ESM quirk: jest loads this file through its require hook (ts-jest), but Node
 * then evaluates it as ESM and resolves its *static* imports natively, where
 * `./postgres-source.js` does not exist (only the .ts does) and moduleNameMapper
 * does not apply. So the helper is required explicitly by its .ts name while
 * jest's require hook is active; the static import below is type-only (erased).
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { GlobalConfig, ProjectConfig } from 'jest';
import type * as PostgresSourceModule from './postgres-source.js';

/** Read back by global-teardown.ts (globalSetup and globalTeardown share globalThis). */
const PG_SOURCE_KEY = Symbol.for('nestjs-pg-idempotency.test.postgres');

export default async function globalSetup(
  _globalConfig: GlobalConfig,
  projectConfig: ProjectConfig,
): Promise<void> {
  const requireTs = createRequire(join(projectConfig.rootDir, 'package.json'));
  const { redactUrl, startPostgres } = requireTs(
    './test/harness/postgres-source.ts',
  ) as typeof PostgresSourceModule;

  const startedAt = performance.now();
  const postgres = await startPostgres({
    log: (message) => console.log(`[pg-harness] ${message}`),
  });
  (globalThis as Record<symbol, unknown>)[PG_SOURCE_KEY] = postgres;
  process.env.DATABASE_URL = postgres.url;
  const ms = Math.round(performance.now() - startedAt);
  console.log(
    `\n[pg-harness] PostgreSQL source: ${postgres.source} (${redactUrl(postgres.url)}), ready in ${ms} ms`,
  );
}
