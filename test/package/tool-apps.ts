/**
 * Apps on their own pg pool, without TypeORM: plain pg, Drizzle and Prisma 7, each writing its
 * payment through its tool inside the library's transaction (the TypeORM one is esm-app).
 * drizzle-app and prisma-app start from pg-app's sources and bring their own controller.
 */
import { join } from 'node:path';
import { ROOT, run, type PackedAppSpec } from './packed-app.js';
import { APP_DEPS, deps, installedVersion, REQUIRED_PEERS } from './packed-tarball.js';

const POOL_APP = [...REQUIRED_PEERS, ...APP_DEPS, '@types/pg'];

/**
 * `prisma generate` with the repository's Prisma CLI (the app's would add 300 MB to its install),
 * offline: generate never runs the schema engine, but the CLI downloads it unless told where one is.
 */
const generatePrismaClient = (dir: string) =>
  run(
    process.execPath,
    [
      join(ROOT, 'node_modules/prisma/build/index.js'),
      'generate',
      '--schema',
      'prisma/schema.prisma',
    ],
    dir,
    60_000,
    { PRISMA_SCHEMA_ENGINE_BINARY: '/bin/false' },
  );

export function toolAppSpecs(tarball: string): PackedAppSpec[] {
  // The generated client must match its runtime: the CLI's exact version.
  const prisma = installedVersion('prisma');
  return [
    { name: 'pg-app', type: 'module', dependencies: deps(POOL_APP, tarball) },
    {
      name: 'drizzle-app',
      type: 'module',
      sourcesFrom: 'pg-app',
      dependencies: deps([...POOL_APP, 'drizzle-orm'], tarball),
    },
    {
      name: 'prisma-app',
      type: 'module',
      sourcesFrom: 'pg-app',
      dependencies: {
        ...deps(POOL_APP, tarball),
        '@prisma/client': prisma,
        '@prisma/adapter-pg': prisma,
      },
      beforeBuild: generatePrismaClient,
    },
  ];
}
