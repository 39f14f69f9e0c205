import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './packed-app.js';

/** The quick start an npm user copies is the app the packed-package test compiles and runs. */
describe('README quick start', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const snippet = (file: string) => {
    const start = readme.indexOf('```ts\n', readme.indexOf(`\`${file}\`:`)) + '```ts\n'.length;
    return readme.slice(start, readme.indexOf('```\n', start));
  };
  const appFile = (file: string) =>
    readFileSync(join(ROOT, 'test/package/cli-esm-app/src', file), 'utf8').replace(
      /^\/\/ .*\n/,
      '',
    );

  it.each(['app.module.ts', 'payments.controller.ts'])('%s is test/package/cli-esm-app', (file) => {
    expect(snippet(file)).toBe(appFile(file));
  });
});
