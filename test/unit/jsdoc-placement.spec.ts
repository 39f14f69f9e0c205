import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { ROOT } from './markdown-blocks.js';

/**
 * An editor shows only the JSDoc block right above a declaration: a second block stacked above it
 * (a comment left behind when code moved) is lost to readers, or documents the wrong thing.
 * A file's own comment stands apart, a blank line above the first declaration.
 */
function stackedJsDocs(file: string): string[] {
  const source = ts.createSourceFile(
    file,
    readFileSync(file, 'utf8'),
    ts.ScriptTarget.ES2022,
    true,
  );
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    const docs = (node as { jsDoc?: ts.JSDoc[] }).jsDoc ?? [];
    // A block a blank line separates from the next one is a file or section comment.
    const touching = docs.slice(1).filter((doc, i) => {
      return !/\n[ \t]*\n/.test(source.text.slice(docs[i].end, doc.getStart(source)));
    });
    if (touching.length > 0) {
      const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
      found.push(`${relative(ROOT, file)}:${line + 1}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe('JSDoc placement in lib/', () => {
  it('no declaration has two JSDoc blocks stacked above it', () => {
    const files = readdirSync(join(ROOT, 'lib'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => join(ROOT, 'lib', f));
    expect(files.length).toBeGreaterThan(20);
    expect(files.flatMap(stackedJsDocs)).toEqual([]);
  });
});
