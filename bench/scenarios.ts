/**
 * The load of each scenario, driven by autocannon: which route, how many connections, and the
 * Idempotency-Key of every request (set in `setupRequest`). Responses are tallied so the cell can
 * be checked against the rows the handlers wrote.
 */
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import type { BenchConfig, ScenarioName } from './config.js';

const BODY = JSON.stringify({ amount: 100 });
const HEADERS = { 'content-type': 'application/json' };
const KEY_HEADER = 'idempotency-key';

export interface Tally {
  sent: number;
  responses: number;
  /** 2xx responses that ran the handler (no `Idempotent-Replayed`). */
  executed: number;
  /** 2xx responses replayed from a stored record. */
  replayed: number;
  statuses: Record<string, number>;
}

interface RequestState {
  slot?: number;
  gen?: number;
}

interface Plan {
  path: string;
  connections: number;
  /** The key of the next request, or undefined to send none. */
  nextKey(state: RequestState): string | undefined;
  onResponse?(state: RequestState, status: number): void;
  /** Runs before the load, e.g. to complete the keys a replay needs. */
  prepare?(url: string): Promise<void>;
}

function plan(scenario: ScenarioName, config: BenchConfig, tag: string): Plan {
  const connections = config.connections;
  switch (scenario) {
    case 'first':
      return { path: '/payments', connections, nextKey: () => randomUUID() };
    case 'replay': {
      const keys = Array.from({ length: config.replayKeys }, (_, i) => `${tag}-${i}`);
      let next = 0;
      return {
        path: '/payments',
        connections,
        nextKey: () => keys[next++ % keys.length],
        prepare: (url) => completeKeys(url, keys),
      };
    }
    case 'nokey':
      return { path: '/payments', connections, nextKey: () => undefined };
    case 'undecorated':
      return { path: '/plain', connections, nextKey: () => randomUUID() };
    case 'conflict': {
      // Requests go round-robin over the slots; a slot's key changes once it has been answered
      // with 2xx, so each key is always in flight and its duplicates meet the running claim.
      const generations = new Array<number>(config.conflictKeys).fill(0);
      let next = 0;
      return {
        path: '/slow',
        connections: config.conflictConnections,
        nextKey(state) {
          state.slot = next++ % generations.length;
          state.gen = generations[state.slot];
          return `${tag}-${state.slot}-${state.gen}`;
        },
        onResponse(state, status) {
          const slot = state.slot as number;
          if (status < 300 && generations[slot] === state.gen) generations[slot]++;
        },
      };
    }
  }
}

/** Completes every key once (16 at a time) so the measured load only replays. */
export async function completeKeys(url: string, keys: string[]): Promise<void> {
  let next = 0;
  const failures: number[] = [];
  const worker = async () => {
    while (next < keys.length) {
      const key = keys[next++];
      const res = await fetch(`${url}/payments`, {
        method: 'POST',
        headers: { ...HEADERS, [KEY_HEADER]: key },
        body: BODY,
      });
      await res.arrayBuffer();
      if (!res.ok) failures.push(res.status);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  if (failures.length > 0) {
    throw new Error(
      `completing the replay keys: ${failures.length} answered ${[...new Set(failures)].join('/')}`,
    );
  }
}

function isReplayed(headers: Record<string, unknown>): boolean {
  return (headers['Idempotent-Replayed'] ?? headers['idempotent-replayed']) === 'true';
}

export interface LoadResult {
  result: autocannon.Result;
  tally: Tally;
}

/** Prepares the scenario (e.g. completes the replay keys) and returns the load to run. */
export async function prepareLoad(
  scenario: ScenarioName,
  url: string,
  config: BenchConfig,
  tag: string,
): Promise<(seconds: number) => Promise<LoadResult>> {
  const p = plan(scenario, config, tag);
  await p.prepare?.(url);
  return async (seconds) => {
    const tally: Tally = { sent: 0, responses: 0, executed: 0, replayed: 0, statuses: {} };
    const result = await autocannon({
      url,
      connections: p.connections,
      duration: seconds,
      requests: [
        {
          method: 'POST',
          path: p.path,
          headers: HEADERS,
          body: BODY,
          setupRequest(req, context) {
            tally.sent++;
            const key = p.nextKey(context as RequestState);
            return key === undefined
              ? req
              : { ...req, headers: { ...req.headers, [KEY_HEADER]: key } };
          },
          onResponse(status, _body, context, headers) {
            tally.responses++;
            tally.statuses[status] = (tally.statuses[status] ?? 0) + 1;
            if (status >= 200 && status < 300) {
              if (isReplayed(headers as Record<string, unknown>)) tally.replayed++;
              else tally.executed++;
            }
            p.onResponse?.(context as RequestState, status);
          },
        },
      ],
    });
    return { result, tally };
  };
}
