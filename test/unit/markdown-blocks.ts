import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The pages a reader sees: the README and every page under docs/. */
export const DOC_PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];

export interface CodeBlock {
  page: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The fence's info string, e.g. `ts` or `ts fragment`. */
  info: string;
  /** The file name the line before the block gives (`` `app.module.ts`: ``), if any. */
  fileName?: string;
  code: string;
}

export function codeBlocks(page: string): CodeBlock[] {
  const lines = readFileSync(join(ROOT, page), 'utf8').split('\n');
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(.*)$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.indexOf('```', i + 1);
    let before = i - 1;
    while (before >= 0 && lines[before].trim() === '') before--;
    const named = /^`([\w.-]+\.ts)`:$/.exec(lines[before] ?? '');
    blocks.push({
      page,
      line: i + 1,
      info: open[1].trim(),
      fileName: named?.[1],
      code: lines.slice(i + 1, end).join('\n') + '\n',
    });
    i = end;
  }
  return blocks;
}
