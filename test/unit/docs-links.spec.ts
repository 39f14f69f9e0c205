import { describe, expect, it } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { DOC_PAGES, ROOT } from './markdown-blocks.js';

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchor = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');

function anchorsOf(page: string): Set<string> {
  const text = readFileSync(join(ROOT, page), 'utf8').replace(/^```[^]*?^```$/gm, '');
  return new Set([...text.matchAll(/^#+ (.+)$/gm)].map((m) => anchor(m[1])));
}

const PAGES = [...DOC_PAGES, 'bench/README.md', 'sample-app/README.md'];

describe('links of the README and docs/', () => {
  it('the README stays a first read: at most 200 lines', () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n');
    expect(lines.length).toBeLessThanOrEqual(200);
  });

  it('every relative link reaches a file, and its #anchor a heading there', () => {
    const broken = PAGES.flatMap((page) => {
      const text = readFileSync(join(ROOT, page), 'utf8').replace(/^```[^]*?^```$/gm, '');
      return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
        .map((m) => m[1])
        .filter((link) => !/^[a-z]+:/.test(link))
        .filter((link) => {
          const [path, hash] = link.split('#');
          const target = path ? normalize(join(dirname(page), path)) : page;
          if (!existsSync(join(ROOT, target))) return true;
          return hash !== undefined && !anchorsOf(target).has(hash);
        })
        .map((link) => `${page}: ${link}`);
    });
    expect(broken).toEqual([]);
  });
});
