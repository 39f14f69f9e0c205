/**
 * A fresh Nest app outside the repository that depends on the packed tarball, as an npm user's
 * would: copied from test/package/<name>/ into a temp folder, installed from the registry
 * (`--prefer-offline`: the npm cache answers what it can), compiled with the repo's TypeScript
 * and run as a child process.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const execFileAsync = promisify(execFile);

/** Runs a command; on failure the error carries its output (npm and tsc explain themselves). */
export async function run(
  file: string,
  args: string[],
  cwd: string,
  timeoutMs: number,
  env: Record<string, string> = {},
) {
  try {
    return await execFileAsync(file, args, {
      cwd,
      env: npmFreeEnv(env),
      timeout: timeoutMs,
      maxBuffer: 16 << 20,
    });
  } catch (err) {
    const e = err as Error & { stdout?: string; stderr?: string };
    throw new Error(`${file} ${args.join(' ')} failed: ${e.message}\n${e.stdout}\n${e.stderr}`, {
      cause: err,
    });
  }
}

/** `npm test`'s own npm_* variables (package, lifecycle, config) must not leak into the app's npm. */
function npmFreeEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const keep = new Set(['npm_config_cache', 'npm_config_registry', 'npm_config_userconfig']);
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.toLowerCase().startsWith('npm_') || keep.has(k.toLowerCase())) env[k] = v;
  }
  return { ...env, ...extra };
}

export interface PackedAppSpec {
  /** Folder under test/package/ with `src/` and `tsconfig.json`. */
  name: string;
  type: 'commonjs' | 'module';
  dependencies: Record<string, string>;
  devDependencies?: Record<string, string>;
  /** Another app under test/package/ whose src/ files this app starts from (its own win). */
  sourcesFrom?: string;
  /** Compile with the app's own `typescript` on this tsconfig (as `nest build` does); else the repo's on `tsconfig.json`. */
  ownTsc?: string;
  /** Runs in the installed app before it compiles (a code generator, as the app's build would). */
  beforeBuild?: (dir: string) => Promise<unknown>;
}

/** Copies, installs and compiles the app into `<parent>/<name>`; returns its folder. */
export async function prepareApp(parent: string, spec: PackedAppSpec): Promise<string> {
  const dir = join(parent, spec.name);
  if (spec.sourcesFrom) {
    await cp(join(ROOT, 'test/package', spec.sourcesFrom, 'src'), join(dir, 'src'), {
      recursive: true,
    });
  }
  await cp(join(ROOT, 'test/package', spec.name), dir, { recursive: true });
  const { name, type, dependencies, devDependencies } = spec;
  const pkg = { name, private: true, type, dependencies, devDependencies };
  await writeFile(join(dir, 'package.json'), JSON.stringify(pkg, null, 2));
  await run(
    'npm',
    ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'],
    dir,
    150_000,
  );
  await spec.beforeBuild?.(dir);
  const tsc = spec.ownTsc ? join(dir, 'node_modules') : join(ROOT, 'node_modules');
  await run(
    process.execPath,
    [join(tsc, 'typescript/bin/tsc'), '-p', spec.ownTsc ?? '.'],
    dir,
    60_000,
  );
  return dir;
}

export interface RunningApp {
  url: string;
  /** The READY line the app prints once it listens. */
  ready: string;
  output: () => string;
  stop: () => Promise<void>;
}

/** Starts `node dist/main.js` on a free port; resolves once it prints `READY <url> ...`. */
export function startApp(dir: string, env: Record<string, string>, timeoutMs = 30_000) {
  const child: ChildProcess = spawn(process.execPath, ['dist/main.js'], {
    cwd: dir,
    env: npmFreeEnv({ ...env, PORT: '0' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(killer);
  };
  return new Promise<RunningApp>((resolve, reject) => {
    const fail = (why: string) => {
      clearTimeout(timer);
      void stop().then(() => reject(new Error(`${dir}: ${why}\n${output}`)));
    };
    const timer = setTimeout(() => fail(`no READY line within ${timeoutMs} ms`), timeoutMs);
    const onEarlyExit = (code: number | null, signal: string | null) =>
      fail(`exited (${code ?? signal}) before READY`);
    child.once('exit', onEarlyExit);
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const ready = /^READY (\S+).*$/m.exec(output);
      if (!ready) return;
      clearTimeout(timer);
      child.off('exit', onEarlyExit);
      resolve({ url: ready[1], ready: ready[0], output: () => output, stop });
    });
  });
}
