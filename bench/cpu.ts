/**
 * CPU time per response, from /proc (Linux; null elsewhere): of the variant's Node process, and
 * of its store (the PostgreSQL backends serving the bench database, plus redis-server for the
 * peer). Unlike req/s, this hardly moves when other work shares the 2 cores.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICK_US = 10_000; // USER_HZ is 100 on Linux

/** utime + stime of a process, in µs; null when it is gone or /proc is missing. */
export function processCpuUs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name start at field 3; utime is 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_US;
  } catch {
    return null;
  }
}

export function findProcess(command: string): number | undefined {
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === command) return Number(entry);
      } catch {
        // exited meanwhile
      }
    }
  } catch {
    // no /proc
  }
  return undefined;
}

export interface CpuSample {
  server: number | null;
  store: Map<number, number>;
}

export function sampleCpu(serverPid: number, storePids: number[]): CpuSample {
  const store = new Map<number, number>();
  for (const pid of storePids) {
    const us = processCpuUs(pid);
    if (us !== null) store.set(pid, us);
  }
  return { server: processCpuUs(serverPid), store };
}

/** µs per response between two samples; a store process new since `before` counts from its start. */
export function perResponse(before: CpuSample, after: CpuSample, responses: number) {
  if (responses === 0) return { server: null, store: null };
  const server =
    before.server === null || after.server === null
      ? null
      : (after.server - before.server) / responses;
  let store = 0;
  for (const [pid, us] of after.store) store += us - (before.store.get(pid) ?? 0);
  return { server, store: after.store.size === 0 ? null : store / responses };
}
