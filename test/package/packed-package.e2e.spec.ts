import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';
import { prepareApp, ROOT, run, startApp, type RunningApp } from './packed-app.js';

/**
 * What an npm user gets: `npm run build`, `npm pack`, then two fresh apps outside the repo that
 * install the tarball with the peer dependencies the README lists. `cjs-app` is a classic
 * CommonJS Nest app (module commonjs, node10 resolution) with the README's quick start;
 * `esm-app` is an ES-module app without @nestjs/typeorm and without @nestjs/schedule.
 */
const repo = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const versionOf = (name: string): string =>
  repo.peerDependencies[name] ?? repo.devDependencies[name];
const deps = (names: string[], tarball: string) => ({
  'nestjs-pg-idempotency': `file:${tarball}`,
  ...Object.fromEntries(names.map((name) => [name, versionOf(name)])),
});
const REQUIRED_PEERS = Object.keys(repo.peerDependencies).filter(
  (name) => !repo.peerDependenciesMeta?.[name]?.optional,
);
const APP_DEPS = ['@nestjs/platform-express', '@types/node'];

async function chargeTwice(app: RunningApp) {
  const key = randomUUID();
  const post = () =>
    fetch(new URL('/payments', app.url), {
      method: 'POST',
      headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
      body: JSON.stringify({ amount: 500, currency: 'eur' }),
    }).then(async (res) => ({ res, body: await res.text() }));
  const first = await post();
  const second = await post();
  return { key, first, second };
}

describe('the packed npm package', () => {
  let temp: string;
  let packedFiles: string[];
  let cjsDir: string;
  let esmDir: string;
  const databases: TestDatabase[] = [];
  const apps: RunningApp[] = [];

  beforeAll(async () => {
    temp = await mkdtemp(join(tmpdir(), 'nestjs-pg-idempotency-pack-'));
    await run('npm', ['run', 'build'], ROOT, 120_000);
    const { stdout } = await run(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', temp],
      ROOT,
      60_000,
    );
    const [packed] = JSON.parse(stdout) as [{ filename: string; files: { path: string }[] }];
    packedFiles = packed.files.map((f) => f.path);
    const tarball = join(temp, packed.filename);
    [cjsDir, esmDir] = await Promise.all([
      prepareApp(temp, {
        name: 'cjs-app',
        type: 'commonjs',
        dependencies: deps(
          [...REQUIRED_PEERS, '@nestjs/schedule', '@nestjs/typeorm', ...APP_DEPS],
          tarball,
        ),
      }),
      prepareApp(temp, {
        name: 'esm-app',
        type: 'module',
        dependencies: deps([...REQUIRED_PEERS, ...APP_DEPS], tarball),
      }),
    ]);
  }, 240_000);

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop()));
    await Promise.all(databases.map((db) => db.drop()));
    if (temp) await rm(temp, { recursive: true, force: true });
  }, 30_000);

  async function boot(dir: string, prefix: string) {
    const db = await createTestDatabase(prefix);
    databases.push(db);
    const app = await startApp(dir, { DATABASE_URL: db.url });
    apps.push(app);
    return { db, app };
  }

  it('ships the build, the SQL files (migrations, reconciliation), README and LICENSE; no source maps, no generator script', () => {
    expect(packedFiles).toEqual(
      expect.arrayContaining([
        'LICENSE',
        'README.md',
        'package.json',
        'dist/lib/index.js',
        'dist/lib/index.d.ts',
        'dist/migrations/index.js',
        'dist/migrations/index.d.ts',
        'migrations/001_idempotency_keys.sql',
        'migrations/005_finance_history.sql',
        'sql/reconciliation.sql',
      ]),
    );
    expect(packedFiles.filter((f) => f.endsWith('.map') || f.includes('write-sql-files'))).toEqual(
      [],
    );
    // What the README points to, by its package path (the `exports` map lets it resolve).
    expect(
      createRequire(join(cjsDir, 'package.json')).resolve(
        'nestjs-pg-idempotency/sql/reconciliation.sql',
      ),
    ).toBe(join(cjsDir, 'node_modules/nestjs-pg-idempotency/sql/reconciliation.sql'));
    expect(packedFiles.filter((f) => !/^(dist|migrations|sql)\//.test(f)).sort()).toEqual([
      'LICENSE',
      'README.md',
      'package.json',
    ]);
  });

  it('a classic CommonJS Nest app compiles against it, migrates, schedules cleanup and replays', async () => {
    const { db, app } = await boot(cjsDir, 'pkg_cjs');
    expect(app.ready).toContain('cleanup-scheduled=true');

    const { key, first, second } = await chargeTwice(app);
    expect(first.res.status).toBe(201);
    expect(first.res.headers.get('idempotent-replayed')).toBeNull();
    expect(second.res.status).toBe(201);
    expect(second.res.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toBe(first.body);

    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const { rows } = await client.query(
        'SELECT status, transaction_id FROM idempotency_keys WHERE idempotency_key = $1',
        [key],
      );
      expect(rows).toEqual([{ status: 'completed', transaction_id: JSON.parse(first.body).id }]);
    } finally {
      await client.end();
    }
  });

  it('an ES-module app boots and replays with cleanup off and @nestjs/schedule not installed', async () => {
    expect(existsSync(join(esmDir, 'node_modules/@nestjs/schedule'))).toBe(false);
    const { app } = await boot(esmDir, 'pkg_esm');

    const { first, second } = await chargeTwice(app);
    expect(first.res.status).toBe(201);
    expect(second.res.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toBe(first.body);
  });
});
