/**
 * The tarball an npm user installs (`npm run build`, `npm pack`), and the dependencies the
 * test/package apps declare beside it, at the versions the repository itself uses.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, run } from './packed-app.js';

const repo = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const versionOf = (name: string): string =>
  repo.peerDependencies[name] ?? repo.devDependencies[name];

/** The version installed in the repository: for packages whose generated code must match it. */
export const installedVersion = (name: string): string =>
  JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')).version;

/** `dependencies` of an app: the tarball and `names` at the repository's ranges. */
export const deps = (names: string[], tarball: string) => ({
  'nestjs-pg-idempotency': `file:${tarball}`,
  ...Object.fromEntries(names.map((name) => [name, versionOf(name)])),
});

export const REQUIRED_PEERS = Object.keys(repo.peerDependencies).filter(
  (name) => !repo.peerDependenciesMeta?.[name]?.optional,
);
/** Nest's HTTP platform and Node's types, which every app builds with. */
export const APP_DEPS = ['@nestjs/platform-express', '@types/node'];

/** Builds and packs the repository into `dir`; returns the tarball and the files it holds. */
export async function packTarball(dir: string) {
  await run('npm', ['run', 'build'], ROOT, 120_000);
  const { stdout } = await run(
    'npm',
    ['pack', '--ignore-scripts', '--json', '--pack-destination', dir],
    ROOT,
    60_000,
  );
  const [packed] = JSON.parse(stdout) as [{ filename: string; files: { path: string }[] }];
  return { tarball: join(dir, packed.filename), files: packed.files.map((f) => f.path) };
}
