import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { ROOT } from './markdown-blocks.js';

/** The only file that may load TypeORM at run time (it still needs none today). */
const ADAPTER = 'lib/store/postgres/typeorm-transactions.adapter.ts';

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts'))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

/** Imports of 'typeorm' that survive compilation: not `import type`, not only type specifiers. */
function runtimeImports(file: string): number {
  const source = ts.createSourceFile(file, readFileSync(join(ROOT, file), 'utf8'), 99, true);
  return source.statements.filter((s) => {
    if (!ts.isImportDeclaration(s) && !ts.isExportDeclaration(s)) return false;
    const from = s.moduleSpecifier;
    if (!from || !ts.isStringLiteral(from) || !from.text.startsWith('typeorm')) return false;
    if (ts.isExportDeclaration(s)) return !s.isTypeOnly;
    const clause = s.importClause;
    if (!clause || clause.isTypeOnly) return !clause;
    const bindings = clause.namedBindings;
    const onlyTypes =
      !clause.name && !!bindings && ts.isNamedImports(bindings)
        ? bindings.elements.every((e) => e.isTypeOnly)
        : false;
    return !onlyTypes;
  }).length;
}

describe('typeorm is an optional peer', () => {
  it('no file of the package loads it at run time, except the TypeORM adapter', () => {
    const loading = [...sources('lib'), ...sources('migrations')].filter(
      (file) => file !== ADAPTER && runtimeImports(file) > 0,
    );
    expect(loading).toEqual([]);
  });

  it('package.json: an optional peer, and a devDependency for the tests', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.peerDependenciesMeta.typeorm).toEqual({ optional: true });
    expect(pkg.devDependencies.typeorm).toBeDefined();
    expect(pkg.dependencies?.typeorm).toBeUndefined();
  });
});
