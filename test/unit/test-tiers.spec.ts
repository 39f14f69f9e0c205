/**
 * The test tiers of jest.config.js, asked of jest itself (`--listTests`, `--showConfig`): every
 * spec runs in exactly one tier, `npm test` runs them all, and the unit tier starts no PostgreSQL.
 */
import { describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TIERS = ['unit', 'db', 'slow'] as const;
/** Each test starts jest itself, on a machine that may be busy. */
const SPAWNS_TIMEOUT = 120_000;

async function jest(...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--experimental-vm-modules', '--no-warnings', 'node_modules/jest/bin/jest.js', ...args],
    { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 },
  );
  return stdout;
}

async function listTests(...select: string[]): Promise<string[]> {
  const args = select.length ? ['--selectProjects', ...select] : [];
  const files = JSON.parse(await jest('--listTests', '--json', ...args)) as string[];
  return files.map((file) => relative(ROOT, file)).sort();
}

describe('test tiers', () => {
  it(
    'puts every spec in exactly one tier, and npm test runs them all',
    async () => {
      const [all, ...tiers] = await Promise.all([
        listTests(),
        ...TIERS.map((tier) => listTests(tier)),
      ]);
      const [unit, db, slow] = tiers;

      expect(unit.length).toBeGreaterThan(10);
      expect(db.length).toBeGreaterThan(10);
      expect(slow.length).toBeGreaterThan(5);
      expect([...unit, ...db, ...slow].sort()).toEqual(all);

      expect(unit).toContain('test/unit/test-tiers.spec.ts');
      expect(unit).toContain('test/store/in-memory.store.spec.ts');
      expect(db).toContain('test/store/postgres.store.spec.ts');
      expect(db).toContain('test/harness/harness.spec.ts');
      expect(db).toContain('test/e2e/round-trips.e2e.spec.ts');
      expect(db).toContain('test/sample-app/sample-app.e2e.spec.ts');
      expect(unit).toContain('test/package/readme-quick-start.spec.ts');
      const reliability = all.filter((file) => file.startsWith('test/reliability/'));
      expect(reliability.every((file) => slow.includes(file))).toBe(true);
      expect(slow).toContain('test/package/packed-package.e2e.spec.ts');
      expect(slow).toContain('test/e2e/pgbouncer.e2e.spec.ts');
      expect(slow).toContain('test/e2e/topology-check.e2e.spec.ts');
    },
    SPAWNS_TIMEOUT,
  );

  it(
    'starts PostgreSQL for the db and slow tiers only',
    async () => {
      const { configs } = JSON.parse(await jest('--showConfig')) as {
        configs: { displayName?: { name: string }; globalSetup?: string | null }[];
      };
      const setupOf = (tier: string) =>
        configs.find((config) => config.displayName?.name === tier)?.globalSetup;

      expect(configs.map((config) => config.displayName?.name).sort()).toEqual([...TIERS].sort());
      expect(setupOf('unit')).toBeFalsy();
      expect(setupOf('db')).toMatch(/test\/harness\/global-setup\.ts$/);
      expect(setupOf('slow')).toBe(setupOf('db'));
    },
    SPAWNS_TIMEOUT,
  );
});
