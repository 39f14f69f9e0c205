import { describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import ts from 'typescript';
import { codeBlocks, DOC_PAGES, ROOT } from './markdown-blocks.js';

/**
 * Every TypeScript block of the README and docs/ type-checks against the library's source, as a
 * reader would paste it into an app. A block marked ```ts fragment``` (a line or two that only
 * makes sense inside the page's larger example) is not compiled; keep those few. The pages call
 * the app's TypeORM objects `dataSource` and `queryRunner` without declaring them each time:
 * those two names are declared for every block (`APP_GLOBALS`), nothing else is.
 */
const TS_INFO = /^(ts|typescript)(\s|$)/;
const FRAGMENT = /^(ts|typescript)\s+fragment$/;

const VIRTUAL = join(ROOT, '.docs-blocks');
const APP_GLOBALS = `import type { DataSource, QueryRunner } from 'typeorm';
declare global {
  const dataSource: DataSource;
  const queryRunner: QueryRunner;
}
`;

function blockFiles(): Map<string, { where: string; code: string }> {
  const files = new Map<string, { where: string; code: string }>();
  files.set(join(VIRTUAL, 'app-globals.d.ts'), { where: 'APP_GLOBALS:0', code: APP_GLOBALS });
  for (const page of DOC_PAGES) {
    codeBlocks(page)
      .filter((b) => TS_INFO.test(b.info) && !FRAGMENT.test(b.info))
      .forEach((b, n) => {
        // Blocks named by the page (the quick start's files) import each other by that name.
        const name = b.fileName ?? `block-${n + 1}.ts`;
        const path = join(VIRTUAL, page.replace(/\W/g, '_'), name);
        // `export {}` makes every block a module of its own, as a file of an app is.
        files.set(path, { where: `${page}:${b.line}`, code: `${b.code}export {};\n` });
      });
  }
  return files;
}

function diagnosticsOf(files: Map<string, { where: string; code: string }>): string[] {
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2023.d.ts'],
    types: ['node'],
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    strict: true,
    esModuleInterop: true,
    skipLibCheck: true,
    noEmit: true,
    baseUrl: ROOT,
    paths: {
      'nestjs-pg-idempotency': ['lib/index.ts'],
      'nestjs-pg-idempotency/migrations': ['migrations/index.ts'],
      'nestjs-pg-idempotency/testing': ['lib/testing/index.ts'],
      'nestjs-pg-idempotency/drizzle': ['lib/adapters/drizzle.transactions.ts'],
      'nestjs-pg-idempotency/kysely': ['lib/adapters/kysely.transactions.ts'],
      'nestjs-pg-idempotency/prisma': ['lib/adapters/prisma.transactions.ts'],
      'nestjs-pg-idempotency/mikro-orm': ['lib/adapters/mikro-orm.transactions.ts'],
    },
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile, directoryExists } = host;
  host.directoryExists = (d) =>
    [...files.keys()].some((f) => f.startsWith(`${d}/`)) ||
    (directoryExists?.call(host, d) ?? true);
  host.fileExists = (f) => files.has(f) || fileExists.call(host, f);
  host.readFile = (f) => files.get(f)?.code ?? readFile.call(host, f);
  host.getSourceFile = (f, language, ...rest) => {
    const file = files.get(f);
    return file
      ? ts.createSourceFile(f, file.code, language, true)
      : getSourceFile.call(host, f, language, ...rest);
  };
  const program = ts.createProgram([...files.keys()], options, host);
  return [...files].flatMap(([path, { where }]) => {
    const source = program.getSourceFile(path)!;
    return [
      ...program.getSyntacticDiagnostics(source),
      ...program.getSemanticDiagnostics(source),
    ].map((d) => {
      const { line } = source.getLineAndCharacterOfPosition(d.start ?? 0);
      const [page, fence] = where.split(':');
      const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
      return `${page}:${Number(fence) + 1 + line}: ${message}`;
    });
  });
}

describe('code blocks of the README and docs/', () => {
  it('finds the TypeScript blocks, few of them fragments', () => {
    const blocks = DOC_PAGES.flatMap(codeBlocks).filter((b) => TS_INFO.test(b.info));
    expect(blocks.length).toBeGreaterThanOrEqual(10);
    expect(blocks.filter((b) => FRAGMENT.test(b.info)).length).toBeLessThanOrEqual(2);
  });

  it('every ts block compiles against the library', () => {
    expect(diagnosticsOf(blockFiles())).toEqual([]);
  }, 120_000);
});
