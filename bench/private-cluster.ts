/**
 * A throwaway PostgreSQL cluster's folder and port for the bench's server-side tools: a temp
 * folder (owned by `postgres` when run as root: initdb and postgres refuse to run as root) and a
 * free loopback port. The machine's own cluster is never touched.
 */
import { execFileSync, type ExecFileSyncOptions } from 'node:child_process';
import { chownSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const PG_BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';

export interface ClusterFolder {
  dir: string;
  data: string;
  port: number;
  /** The `postgres` user's ids when run as root, for spawn and execFileSync. */
  owner?: { uid: number; gid: number };
  /** execFileSync options that run a PostgreSQL binary in `dir` as its owner. */
  asPg: ExecFileSyncOptions;
}

export async function clusterFolder(prefix: string): Promise<ClusterFolder> {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }));
  const owner = process.getuid?.() === 0 ? { uid: id('-u'), gid: id('-g') } : undefined;
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const asPg: ExecFileSyncOptions = { cwd: dir, ...owner, stdio: ['ignore', 'ignore', 'inherit'] };
  const port = await new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
  return { dir, data: join(dir, 'data'), port, owner, asPg };
}

export function initdb(folder: ClusterFolder): void {
  execFileSync(`${PG_BIN}/initdb`, ['-D', folder.data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8'], folder.asPg); // prettier-ignore
}
