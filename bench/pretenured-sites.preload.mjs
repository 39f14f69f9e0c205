// Preloaded (`--import`) by `npm run bench:sites` into a server started with --allow-natives-syntax.
// On SIGUSR2 it walks the functions it can reach (the library's modules, Nest, Express, rxjs, pg,
// Node's http and stream classes, with their prototypes) and prints each one's name and V8's
// description of it: its feedback vector lists the AllocationSite of every literal the function
// creates, by address, the address --trace-pretenuring names when it tenures a site.
import { readdirSync, statSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../package.json'));
const PACKAGES = [
  '@nestjs/core',
  '@nestjs/common',
  '@nestjs/platform-express',
  'express',
  'rxjs',
  'pg',
];
const BUILTINS = ['http', 'stream', 'net', 'events'];
// V8's native syntax, compiled at run time (the server runs with --allow-natives-syntax), so
// that the file itself stays plain JavaScript for the linter.
const debugPrint = new Function('value', '%DebugPrint(value);');

function jsFiles(dir) {
  return readdirSync(dir).flatMap((f) => {
    const p = path.join(dir, f);
    if (statSync(p).isDirectory()) return jsFiles(p);
    return p.endsWith('.js') ? [p] : [];
  });
}

function describeAll(root, name) {
  const seen = new Set();
  const visit = (value, label, depth) => {
    if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return;
    if (seen.has(value) || depth > 4) return;
    seen.add(value);
    if (typeof value === 'function') {
      writeSync(1, `\nSITES-FN ${label}\n`);
      debugPrint(value);
      visit(value.prototype, `${label}.prototype`, depth + 1);
    }
    for (const key of Object.getOwnPropertyNames(value)) {
      if (['caller', 'arguments', 'callee'].includes(key)) continue;
      const d = Object.getOwnPropertyDescriptor(value, key);
      for (const v of [d?.value, d?.get, d?.set]) visit(v, `${label}.${key}`, depth + 1);
    }
  };
  visit(root, name, 0);
}

process.once('SIGUSR2', async () => {
  const modules = [
    ...jsFiles(path.join(here, '../lib')).map((f) => [path.relative(path.join(here, '..'), f), f]),
    ...PACKAGES.map((name) => [name, require.resolve(name)]),
    ...BUILTINS.map((name) => [name, `node:${name}`]),
  ];
  for (const [name, specifier] of modules) {
    // A module the server never loaded is loaded here; one that cannot be is skipped.
    const loaded = await import(specifier).catch(() => undefined);
    if (loaded) describeAll(loaded, name);
  }
  writeSync(1, '\nSITES-DONE\n');
});
