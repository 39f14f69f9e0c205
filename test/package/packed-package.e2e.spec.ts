import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '../harness/test-database.js';
import { prepareApp, run, startApp, type PackedAppSpec, type RunningApp } from './packed-app.js';
import { chargeTwice, expectPaymentCommittedWithRecord, recordOf } from './packed-requests.js';
import { APP_DEPS, deps, packTarball, REQUIRED_PEERS } from './packed-tarball.js';
import { toolAppSpecs } from './tool-apps.js';

/**
 * What an npm user gets: `npm run build`, `npm pack`, then fresh apps outside the repo that
 * install the tarball with the peer dependencies the README lists. `cjs-app` is a classic
 * CommonJS Nest app (module commonjs, node10 resolution); `esm-app` is an ES-module app without
 * @nestjs/typeorm and without @nestjs/schedule, whose handler writes through TypeORM;
 * `cli-esm-app` is the README's quick start in the app the Nest 12 CLI generates (ES modules,
 * TypeScript 6, vitest), with its own tests; `pg-app`, `drizzle-app` and `prisma-app` run on
 * their own pg pool without TypeORM (tool-apps.ts). All install at once.
 */
/** These apps build a TypeORM DataSource: an optional peer they install themselves. */
const TYPEORM_APP = [...REQUIRED_PEERS, 'typeorm'];
/** The devDependencies of @nestjs/schematics 12's ts-esm template that build and test the app. */
const CLI_DEV_DEPS = {
  typescript: '^6.0.2',
  vitest: '^4.1.2',
  vite: '^8.0.0',
  '@types/node': '^24.0.0',
};

describe('the packed npm package', () => {
  let temp: string;
  let packedFiles: string[];
  const dirs: Record<string, string> = {};
  const databases: TestDatabase[] = [];
  const apps: RunningApp[] = [];

  beforeAll(async () => {
    temp = await mkdtemp(join(tmpdir(), 'nestjs-pg-idempotency-pack-'));
    const packed = await packTarball(temp);
    packedFiles = packed.files;
    const { tarball } = packed;
    const specs: PackedAppSpec[] = [
      {
        name: 'cjs-app',
        type: 'commonjs',
        sourcesFrom: 'cli-esm-app', // the quick start; its `.js` imports compile to CommonJS too
        dependencies: deps(
          [...TYPEORM_APP, '@nestjs/schedule', '@nestjs/typeorm', ...APP_DEPS],
          tarball,
        ),
      },
      {
        name: 'esm-app',
        type: 'module',
        dependencies: deps([...TYPEORM_APP, ...APP_DEPS], tarball),
      },
      {
        name: 'cli-esm-app',
        type: 'module',
        dependencies: deps(
          [...TYPEORM_APP, '@nestjs/schedule', '@nestjs/typeorm', '@nestjs/platform-express'],
          tarball,
        ),
        devDependencies: CLI_DEV_DEPS,
        ownTsc: 'tsconfig.build.json',
      },
      ...toolAppSpecs(tarball),
    ];
    // allSettled: one failed install must not leave the others writing after afterAll's rm.
    const prepared = await Promise.allSettled(specs.map((spec) => prepareApp(temp, spec)));
    prepared.forEach((p, i) => {
      if (p.status === 'rejected') throw p.reason;
      dirs[specs[i].name] = p.value;
    });
  }, 420_000);

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
    // What docs/reconciliation.md points to, by its package path (the `exports` map lets it resolve).
    expect(
      createRequire(join(dirs['cjs-app'], 'package.json')).resolve(
        'nestjs-pg-idempotency/sql/reconciliation.sql',
      ),
    ).toBe(join(dirs['cjs-app'], 'node_modules/nestjs-pg-idempotency/sql/reconciliation.sql'));
    expect(packedFiles.filter((f) => !/^(dist|migrations|sql)\//.test(f)).sort()).toEqual([
      'LICENSE',
      'README.md',
      'package.json',
    ]);
  });

  it('a classic CommonJS Nest app compiles against it, migrates, schedules cleanup and replays', async () => {
    const { db, app } = await boot(dirs['cjs-app'], 'pkg_cjs');
    expect(app.ready).toContain('cleanup-scheduled=true');

    const { key, first, second } = await chargeTwice(app);
    expect(first.res.status).toBe(201);
    expect(first.res.headers.get('idempotent-replayed')).toBeNull();
    expect(second.res.status).toBe(201);
    expect(second.res.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toBe(first.body);

    expect(await recordOf(db, 'status, transaction_id', key)).toEqual([
      { status: 'completed', transaction_id: JSON.parse(first.body).id },
    ]);
  });

  it('an ES-module app boots and replays with cleanup off and @nestjs/schedule not installed', async () => {
    expect(existsSync(join(dirs['esm-app'], 'node_modules/@nestjs/schedule'))).toBe(false);
    const { app } = await boot(dirs['esm-app'], 'pkg_esm');

    const { first, second } = await chargeTwice(app);
    expect(first.res.status).toBe(201);
    expect(second.res.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toBe(first.body);
    // Nor is @opentelemetry/api: the library's telemetry is a no-op.
    expect(existsSync(join(dirs['esm-app'], 'node_modules/@opentelemetry/api'))).toBe(false);
  });

  it('with cleanup on and @nestjs/schedule not installed, start-up stops naming the cause and the fix', async () => {
    const db = await createTestDatabase('pkg_esm_cleanup');
    databases.push(db);
    const start = startApp(dirs['esm-app'], { DATABASE_URL: db.url, CLEANUP: 'on' });
    await expect(start).rejects.toThrow(/exited \(1\) before READY/);
    const output = await start.catch((err: Error) => err.message);
    expect(output).toContain(
      "cleanup.enabled is true but @nestjs/schedule could not be loaded (Cannot find package '@nestjs/schedule'",
    );
    expect(output).toContain('npm install @nestjs/schedule and import ScheduleModule.forRoot()');
  });

  it('the quick start in a Nest 12 CLI app: a JWT user { sub } is scoped by the default getUserId', async () => {
    const { db, app } = await boot(dirs['cli-esm-app'], 'pkg_cli');
    const { key, first, second } = await chargeTwice(app, { 'X-Test-User': 'u_42' });
    expect(first.res.status).toBe(201);
    expect(second.res.headers.get('idempotent-replayed')).toBe('true');
    expect(second.body).toBe(first.body);
    expect(await recordOf(db, 'user_id', key)).toEqual([{ user_id: 'u_42' }]);
  });

  it("the CLI app's vitest runs its e2e test and the store contract; node:test runs the contract too", async () => {
    const db = await createTestDatabase('pkg_cli_vitest');
    databases.push(db);
    const vitest = async (config: string) => {
      const out = join(dirs['cli-esm-app'], `${config}.json`);
      await run(
        process.execPath,
        [
          'node_modules/vitest/vitest.mjs',
          'run',
          '-c',
          config,
          '--reporter=json',
          `--outputFile=${out}`,
        ],
        dirs['cli-esm-app'],
        120_000,
        { DATABASE_URL: db.url },
      );
      const report = JSON.parse(readFileSync(out, 'utf8'));
      return report.testResults.flatMap(
        (file: { assertionResults: object[] }) => file.assertionResults,
      ) as {
        title: string;
        status: string;
        ancestorTitles: string[];
      }[];
    };
    const e2e = await vitest('vitest.config.e2e.ts');
    expect(e2e.map((t) => [t.title, t.status])).toEqual([
      ['replays a retry byte for byte', 'passed'],
    ]);
    const unit = await vitest('vitest.config.ts');
    const contract = unit.filter((t) => t.ancestorTitles.includes('IdempotencyStore contract'));
    expect(contract.length).toBeGreaterThan(5);
    expect(contract.filter((t) => t.status !== 'passed')).toEqual([]);

    const { stdout } = await run(
      process.execPath,
      ['--test', '--test-reporter=tap', 'test/store-contract.node-test.js'],
      dirs['cli-esm-app'],
      60_000,
    );
    expect(stdout).not.toMatch(/^\s*not ok/m);
    const passed = [...stdout.matchAll(/^\s*ok \d+ - (.*)$/gm)].map((m) => m[1].trim());
    expect(passed).toEqual(expect.arrayContaining(contract.map((t) => t.title)));
  });
  it('the apps on their own pg pool install no typeorm', () => {
    for (const name of ['pg-app', 'drizzle-app', 'prisma-app']) {
      expect([name, existsSync(join(dirs[name], 'node_modules/typeorm'))]).toEqual([name, false]);
    }
  });

  it.each([
    ['plain pg (migrate(pool), the PoolClient)', 'pg-app'],
    ['Drizzle (node-postgres, its transaction object)', 'drizzle-app'],
    ['Prisma 7 (@prisma/adapter-pg, the interactive transaction client)', 'prisma-app'],
    ['TypeORM (its migrations, the EntityManager)', 'esm-app'],
  ])(
    '%s: migrates a fresh database, replays, commits the write with its record; a failure frees the key',
    async (_tool, name) => {
      const { db, app } = await boot(dirs[name], `pkg_tx_${name.replace('-app', '')}`);
      await expectPaymentCommittedWithRecord(db, app);
    },
  );
});
