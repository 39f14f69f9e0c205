import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';

/** `first`: a new key per request; `replay`: 1000 keys of `prefix`, round robin; `nokey`: no key header. */
export type KeyedScenario = 'first' | 'replay' | 'nokey';

export interface KeyedLoad {
  scenario: KeyedScenario;
  /** Names the replay keys: variants sharing a database must not meet each other's records. */
  prefix: string;
  connections?: number;
  /** A number of requests, or a duration in seconds. */
  amount?: number;
  duration?: number;
}

/** The 1 000 keys a `replay` load of `prefix` cycles over. */
export function replayKeys(prefix: string): string[] {
  return Array.from({ length: 1000 }, (_, i) => `${prefix}-${i}`);
}

/** `POST /payments` of the bench variants under autocannon, each request with its key (none for `nokey`). */
export function keyedLoad(url: string, o: KeyedLoad): Promise<autocannon.Result> {
  let next = 0;
  const keys = o.scenario === 'replay' ? replayKeys(o.prefix) : [];
  const key = () => (o.scenario === 'first' ? randomUUID() : keys[next++ % keys.length]);
  return new Promise((resolve, reject) =>
    autocannon(
      {
        url: `${url}/payments`,
        method: 'POST',
        connections: o.connections ?? 8,
        ...(o.amount !== undefined ? { amount: o.amount } : { duration: o.duration ?? 10 }),
        timeout: 60,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ amount: 100 }),
        requests:
          o.scenario === 'nokey'
            ? undefined
            : [
                {
                  setupRequest: (req) => ({
                    ...req,
                    headers: { ...req.headers, 'idempotency-key': key() },
                  }),
                },
              ],
      },
      (err, result) => (err ? reject(err) : resolve(result)),
    ),
  );
}
