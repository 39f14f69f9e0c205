import { describe, expect, it } from '@jest/globals';
import { HttpException } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { ROOT } from './markdown-blocks.js';
import { flatDefaults } from './option-defaults.js';

/**
 * The `@default` an editor shows on hover is the value IDEMPOTENCY_DEFAULTS has: values compared
 * as written, functions by what they answer on the samples below.
 */
const INTERFACES: Record<string, { file: string; prefix: string; only?: string[] }> = {
  IdempotencyModuleOptions: { file: 'idempotency-module-options.interface.ts', prefix: '' },
  IdempotencyCleanupOptions: {
    file: 'idempotency-module-options.interface.ts',
    prefix: 'cleanup.',
  },
  // Per route only storeResponse has its default there; the others follow the module's options.
  IdempotentOptions: {
    file: 'idempotent-options.interface.ts',
    prefix: '',
    only: ['storeResponse'],
  },
};

const SAMPLES: Record<string, unknown[][]> = {
  storeIf: [200, 201, 204, 302, 304, 400, 401, 402, 404, 409, 422, 429, 500, 502, 503].flatMap(
    (status) =>
      [undefined, new Error('unknown'), new HttpException('known', 402)].map((e) => [status, e]),
  ),
  getUserId: [
    {},
    { user: { id: 'u1' } },
    { user: { sub: 's1' } },
    { user: { userId: 7 } },
    { user: { id: 'a', sub: 'b' } },
    { user: {} },
  ].map((req) => [req]),
  fingerprint: [[{ body: { amount: 1 } }], [{}]],
  getRpcKey: [
    [{ idempotencyKey: 'k' }, {}],
    [null, {}],
    [undefined, {}],
    [{}, {}],
  ],
  getRpcUserId: [
    [{ tenantId: 't' }, {}],
    [null, {}],
  ],
};

/** Option name → the text of its `@default` tag, without the explanation in parentheses. */
function jsdocDefaults(): Map<string, string> {
  const found = new Map<string, string>();
  for (const [name, { file, prefix, only }] of Object.entries(INTERFACES)) {
    const path = join(ROOT, 'lib/interfaces', file);
    const source = ts.createSourceFile(
      path,
      readFileSync(path, 'utf8'),
      ts.ScriptTarget.ES2022,
      true,
    );
    const declaration = source.statements.find(
      (s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === name,
    )!;
    for (const member of declaration.members) {
      const tag = ts.getJSDocTags(member).find((t) => t.tagName.text === 'default');
      if (!tag || !member.name || !ts.isIdentifier(member.name)) continue;
      if (only && !only.includes(member.name.text)) continue;
      const text = ts.getTextOfJSDocComment(tag.comment) ?? '';
      // `1048576 (1 MiB)`: a value, then why; a function default is the whole text.
      found.set(prefix + member.name.text, text.startsWith('(') ? text : text.split(' (')[0]);
    }
  }
  return found;
}

const evaluate = (code: string): unknown =>
  new Function('HttpException', `return (${code});`)(HttpException);

describe('@default tags of the option interfaces', () => {
  const tags = jsdocDefaults();
  const defaults = flatDefaults();

  it('every function default has samples here', () => {
    const functions = [...defaults].filter(([, v]) => typeof v === 'function').map(([k]) => k);
    expect(functions.filter((name) => !SAMPLES[name])).toEqual([]);
  });

  it.each([...tags.keys()])('%s', (name) => {
    const documented = evaluate(tags.get(name)!);
    const actual = defaults.get(name);
    if (typeof actual !== 'function') {
      expect(documented).toEqual(actual);
      return;
    }
    const answers = (fn: unknown) =>
      SAMPLES[name].map((args) => (fn as (...a: unknown[]) => unknown)(...args));
    expect(answers(documented)).toEqual(answers(actual));
  });
});
