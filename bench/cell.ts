/** One measured cell (variant × scenario × round): load, then check the rows the handlers wrote. */
import type { BenchConfig, ScenarioName, VariantName } from './config.js';
import { findProcess, perResponse, sampleCpu } from './cpu.js';
import type { BenchDatabase, RowsSince } from './database.js';
import { prepareLoad, type Tally } from './scenarios.js';

export interface CellRun {
  round: number;
  variant: VariantName;
  scenario: ScenarioName;
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  /** CPU µs per response: the variant's process, and its store's processes (null off Linux). */
  cpu: { server: number | null; store: number | null };
  tally: Tally;
  db: RowsSince;
  /** Empty when the cell is correct. */
  problems: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Does this variant claim keys on this scenario's route? */
export function isIdempotent(variant: VariantName, scenario: ScenarioName): boolean {
  return (
    variant !== 'baseline' &&
    (scenario === 'first' || scenario === 'replay' || scenario === 'conflict')
  );
}

export async function runCell(
  db: BenchDatabase,
  config: BenchConfig,
  server: { url: string; pid: number; name: VariantName },
  scenario: ScenarioName,
  round: number,
  seconds = config.duration,
): Promise<CellRun> {
  const variant = server.name;
  const load = await prepareLoad(scenario, server.url, config, `r${round}-${variant}-${scenario}`);
  await db.checkpoint();
  const since = await db.lastId();
  const storePids = async () => {
    const pids = await db.backendPids();
    const redis = variant === 'peer' ? findProcess('redis-server') : undefined;
    return redis === undefined ? pids : [...pids, redis];
  };
  const before = sampleCpu(server.pid, await storePids());
  const { result, tally } = await load(seconds);
  await sleep(500); // requests still running at the stop finish their INSERT
  const after = sampleCpu(server.pid, await storePids());
  const rows = await db.rowsSince(since);
  const run: CellRun = {
    round,
    variant,
    scenario,
    rps: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    cpu: perResponse(before, after, tally.responses),
    tally,
    db: rows,
    problems: [],
  };
  run.problems = check(run);
  return run;
}

/** Rows created must equal first executions; keys must never run twice. */
function check({ variant, scenario, tally, db, errors }: CellRun): string[] {
  const problems: string[] = [];
  const idempotent = isIdempotent(variant, scenario);
  // Requests cut off by the stop may have run without their response being counted.
  const unanswered = Math.max(0, tally.sent - tally.responses);
  if (db.rows < tally.executed || db.rows > tally.executed + unanswered) {
    problems.push(
      `rows ${db.rows} != first executions ${tally.executed} (+${unanswered} unanswered at stop)`,
    );
  }
  if (idempotent && db.duplicateKeys > 0)
    problems.push(`${db.duplicateKeys} keys ran the handler more than once`);
  if (idempotent && scenario === 'replay' && (db.rows > 0 || tally.executed > 0)) {
    problems.push(
      `replay created ${db.rows} rows and ran the handler ${tally.executed} times (expected 0)`,
    );
  }
  if ((!idempotent || scenario === 'first') && tally.replayed > 0) {
    problems.push(`${tally.replayed} responses replayed where every request is new`);
  }
  const unexpected = Object.entries(tally.statuses)
    .filter(
      ([status]) =>
        !(Number(status) < 300 || (idempotent && scenario === 'conflict' && status === '409')),
    )
    .map(([status, count]) => `${count}×${status}`);
  if (unexpected.length > 0) problems.push(`unexpected statuses ${unexpected.join(', ')}`);
  if (errors > 0) problems.push(`${errors} connection errors/timeouts`);
  return problems;
}
