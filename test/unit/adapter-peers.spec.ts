/**
 * The ORM adapters are optional peers: the main entry point never reaches them (an app without
 * Drizzle, Kysely, Prisma or MikroORM installed loads it), and each adapter imports only its own
 * tool at runtime, so installing one tool is enough for its entry point.
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TOOLS = /^(drizzle-orm|kysely|@prisma\/|@mikro-orm\/)/;
/** `import ... from 'x'` and `export ... from 'x'`, without `import type`. */
const RUNTIME_IMPORT = /^(?:import|export)\s+(?!type\b)[^;]*?from\s+'([^']+)'/gms;

function runtimeImports(file: string): string[] {
  const source = readFileSync(join(ROOT, file), 'utf8');
  return [...source.matchAll(RUNTIME_IMPORT)].map((m) => m[1]);
}

/** Every lib file the entry reaches at runtime, and the packages they import. */
function reach(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    for (const target of runtimeImports(file)) {
      if (target.startsWith('.'))
        visit(relative(ROOT, join(ROOT, dirname(file), target)).replace(/\.js$/, '.ts'));
      else packages.add(target);
    }
  };
  visit(entry);
  return { files, packages };
}

describe('ORM adapters as optional peers', () => {
  it('the main entry reaches no adapter and no ORM package', () => {
    const { files, packages } = reach('lib/index.ts');
    expect(files.size).toBeGreaterThan(20);
    expect([...files].filter((f) => f.startsWith('lib/adapters/'))).toEqual([]);
    expect([...packages].filter((p) => TOOLS.test(p))).toEqual([]);
  });

  it.each([
    ['lib/adapters/drizzle.transactions.ts', ['drizzle-orm/node-postgres']],
    ['lib/adapters/kysely.transactions.ts', ['kysely']],
    ['lib/adapters/prisma.transactions.ts', ['@prisma/adapter-pg', 'pg']],
    ['lib/adapters/mikro-orm.transactions.ts', []],
  ])('%s imports only its own tool at runtime', (file, expected) => {
    expect([...reach(file).packages].sort()).toEqual(expected);
  });
});
