import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { OPTION_RULES } from '../../lib/idempotency-options.check.js';
import { ROOT } from './markdown-blocks.js';
import { flatDefaults, shownValue } from './option-defaults.js';

/** The tables of docs/options.md (forRoot(), then @Idempotent()): option name → default shown. */
function optionTables(): Map<string, string>[] {
  const lines = readFileSync(join(ROOT, 'docs/options.md'), 'utf8').split('\n');
  const tables: Map<string, string>[] = [];
  lines.forEach((line, i) => {
    if (line !== '| option | default | meaning |') return;
    const rows = new Map<string, string>();
    for (const row of lines.slice(i + 2)) {
      if (!row.startsWith('|')) break;
      const [name, shown] = row.split(/\s\|\s/).map((cell) => cell.replace(/^\|\s*/, '').trim());
      // `getUserId(req)` is the option getUserId; a default shown as `code` is read from it.
      const code = /^`([^`]*)`/.exec(shown);
      rows.set(name.replace(/`/g, '').replace(/\(.*\)$/, ''), code ? code[1] : shown);
    }
    tables.push(rows);
  });
  return tables;
}

const defaults = flatDefaults();
/** Each documented default that is a value (functions are held to their JSDoc instead). */
const compared = (rows: Map<string, string>) => {
  const valued = [...rows].filter(([name]) => {
    return defaults.has(name) && typeof defaults.get(name) !== 'function';
  });
  return {
    shown: valued.map(([name, text]) => [name, shownValue(text, defaults.get(name))]),
    actual: valued.map(([name]) => [name, defaults.get(name)]),
  };
};

describe('docs/options.md', () => {
  const [module, route] = optionTables();

  it('lists every forRoot() option the start-up check knows, and isGlobal', () => {
    const cleanup = Object.keys((OPTION_RULES.cleanup as { keys: object }).keys);
    const options = Object.keys(OPTION_RULES)
      .filter((key) => key !== 'cleanup')
      .concat(
        cleanup.map((key) => `cleanup.${key}`),
        'isGlobal',
      );
    expect([...module.keys()].sort()).toEqual(options.sort());
  });

  it('shows every default of IDEMPOTENCY_DEFAULTS, as the code has it', () => {
    // The route table repeats ttlSeconds as "module's": the module table shows its value.
    const both = new Map([...route, ...module]);
    expect([...defaults.keys()].filter((name) => !both.has(name))).toEqual([]);
    const { shown, actual } = compared(both);
    expect(shown).toEqual(actual);
  });
});
