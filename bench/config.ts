/** Settings of a bench run: flags (`--rounds 3`) win over env (`BENCH_ROUNDS=3`) over defaults. */
export const ALL_VARIANTS = [
  'baseline',
  'raw-sql',
  'raw-sql-padded',
  'raw-store-sql',
  'store-direct',
  'raw-cache',
  'module',
  'module-nocache',
  'module-tx',
  'module-single',
  'module-pg',
  'module-pg-single',
  'raw-single',
  'peer',
] as const;
export const ALL_SCENARIOS = ['first', 'replay', 'nokey', 'undecorated', 'conflict'] as const;
export type VariantName = (typeof ALL_VARIANTS)[number];
export type ScenarioName = (typeof ALL_SCENARIOS)[number];

export interface BenchConfig {
  adminUrl: string;
  redisUrl: string;
  rounds: number;
  /** Seconds per measured cell. */
  duration: number;
  /** Seconds of warm-up per variant and scenario, before the first round. */
  warmup: number;
  connections: number;
  conflictConnections: number;
  conflictKeys: number;
  replayKeys: number;
  poolSize: number;
  variants: VariantName[];
  scenarios: ScenarioName[];
}

const HELP = `npm run bench [-- options]
  --rounds N         interleaved rounds (BENCH_ROUNDS, default 3)
  --duration S       seconds per cell (BENCH_DURATION, default 10)
  --warmup S         warm-up seconds per variant and scenario (BENCH_WARMUP, default 2)
  --connections N    connections (BENCH_CONNECTIONS, default 32; conflict uses 64)
  --pool N           pg pool size of every variant (BENCH_POOL_SIZE, default 10)
  --variants a,b     subset of ${ALL_VARIANTS.join(',')} (BENCH_VARIANTS)
  --scenarios a,b    subset of ${ALL_SCENARIOS.join(',')} (BENCH_SCENARIOS)
  BENCH_DATABASE_URL admin URL (default postgres://postgres@127.0.0.1:5432/test)
  BENCH_REDIS_URL    Redis for the peer (default redis://127.0.0.1:6379)
  BENCH_VARIANT_NODE_ARGS  extra node flags of the variant servers, e.g. "--no-allocation-site-pretenuring"`;

function flags(argv: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') {
      console.log(HELP);
      process.exit(0);
    }
    if (!arg.startsWith('--')) throw new Error(`Unexpected argument ${arg}\n${HELP}`);
    const [name, inline] = arg.slice(2).split('=', 2);
    out[name] = inline ?? argv[++i];
  }
  return out;
}

function list<T extends string>(value: string | undefined, all: readonly T[]): T[] {
  if (!value) return [...all];
  const picked = value.split(',').map((v) => v.trim());
  for (const v of picked)
    if (!all.includes(v as T)) throw new Error(`Unknown "${v}"; one of ${all.join(', ')}`);
  return all.filter((v) => picked.includes(v));
}

export function readConfig(argv = process.argv.slice(2), env = process.env): BenchConfig {
  const f = flags(argv);
  const num = (flag: string, name: string, fallback: number, min = Number.MIN_VALUE) => {
    const value = Number(f[flag] ?? env[name] ?? fallback);
    if (!Number.isFinite(value) || value < min)
      throw new Error(`--${flag} / ${name} must be a number >= ${min}`);
    return value;
  };
  return {
    adminUrl: env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    redisUrl: env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
    rounds: num('rounds', 'BENCH_ROUNDS', 3),
    duration: num('duration', 'BENCH_DURATION', 10),
    warmup: num('warmup', 'BENCH_WARMUP', 2, 0),
    connections: num('connections', 'BENCH_CONNECTIONS', 32),
    conflictConnections: 64,
    conflictKeys: 8,
    replayKeys: 1000,
    poolSize: num('pool', 'BENCH_POOL_SIZE', 10),
    variants: list(f.variants ?? env.BENCH_VARIANTS, ALL_VARIANTS),
    scenarios: list(f.scenarios ?? env.BENCH_SCENARIOS, ALL_SCENARIOS),
  };
}
