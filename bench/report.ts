/** Medians over rounds, the results table, and the ratios the targets are stated in. */
import type { ScenarioName, VariantName } from './config.js';
import type { CellRun } from './cell.js';

export interface CellSummary {
  variant: VariantName;
  scenario: ScenarioName;
  rounds: number;
  rps: number;
  rpsMin: number;
  rpsMax: number;
  p50: number;
  p99: number;
  non2xx: number;
  /** Median CPU µs per response of the variant's Node process / of its store (PostgreSQL, Redis). */
  serverUs: number | null;
  storeUs: number | null;
  /** req/s relative to `baseline` on the same scenario. */
  vsBaseline: number | null;
  failedRounds: number;
}

export interface Ratio {
  label: string;
  /** Ratio of the two cells' median req/s: the figure the targets are stated in. */
  value: number | null;
  /**
   * The same ratio taken round by round (the two cells of one round, a few cells apart), its
   * median and span: how far the machine's noise reaches into `value`.
   */
  perRound: { median: number; min: number; max: number } | null;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function medianOrNull(values: (number | null)[]): number | null {
  const known = values.filter((v): v is number => v !== null);
  return known.length === 0 ? null : median(known);
}

export function summarize(
  runs: CellRun[],
  variants: VariantName[],
  scenarios: ScenarioName[],
): CellSummary[] {
  const out: CellSummary[] = [];
  for (const variant of variants) {
    for (const scenario of scenarios) {
      const cell = runs.filter((r) => r.variant === variant && r.scenario === scenario);
      if (cell.length === 0) continue;
      const rps = cell.map((r) => r.rps);
      out.push({
        variant,
        scenario,
        rounds: cell.length,
        rps: median(rps),
        rpsMin: Math.min(...rps),
        rpsMax: Math.max(...rps),
        p50: median(cell.map((r) => r.p50)),
        p99: median(cell.map((r) => r.p99)),
        non2xx: median(cell.map((r) => r.non2xx)),
        serverUs: medianOrNull(cell.map((r) => r.cpu.server)),
        storeUs: medianOrNull(cell.map((r) => r.cpu.store)),
        vsBaseline: null,
        failedRounds: cell.filter((r) => r.problems.length > 0).length,
      });
    }
  }
  for (const s of out) {
    const base = out.find((b) => b.variant === 'baseline' && b.scenario === s.scenario);
    s.vsBaseline = base ? s.rps / base.rps : null;
  }
  return out;
}

const plainDriverPairs: [VariantName, VariantName, ScenarioName][] = [
  ['module-pg', 'module', 'first'],
  ['module-pg', 'module', 'replay'],
  ['module-pg-single', 'module-single', 'first'],
];

const targetPairs: [VariantName, VariantName, ScenarioName][] = [
  ['module', 'raw-sql', 'first'],
  ['module', 'raw-sql', 'replay'],
  ['module', 'peer', 'replay'],
  ['module', 'baseline', 'replay'],
  ['raw-cache', 'baseline', 'replay'],
  ['module', 'raw-cache', 'replay'],
  ['module-nocache', 'raw-sql', 'replay'],
  ['module', 'baseline', 'nokey'],
  ['raw-sql', 'baseline', 'nokey'],
  ['module-tx', 'module', 'first'],
  ['module-single', 'baseline', 'first'],
  ['module-single', 'peer', 'first'],
  ['raw-single', 'baseline', 'first'],
  ['module-single', 'raw-single', 'first'],
  // Issue 18: the plain-driver core no slower than the TypeORM path.
  ...plainDriverPairs,
  // Issue 19: the distance to the floor split into the store's SQL, its JavaScript and the rest.
  ['raw-store-sql', 'raw-sql', 'first'],
  ['store-direct', 'raw-store-sql', 'first'],
  ['store-direct', 'raw-sql', 'first'],
  ['module-pg', 'store-direct', 'first'],
];

export function targetRatios(summary: CellSummary[], runs: CellRun[]): Ratio[] {
  const rps = (variant: VariantName, scenario: ScenarioName) =>
    summary.find((s) => s.variant === variant && s.scenario === scenario)?.rps;
  return targetPairs.map(([a, b, scenario]) => {
    const top = rps(a, scenario);
    const bottom = rps(b, scenario);
    return {
      label: `${a} / ${b} ${scenario}`,
      value: top !== undefined && bottom !== undefined ? top / bottom : null,
      perRound: perRoundRatio(runs, a, b, scenario),
    };
  });
}

function perRoundRatio(runs: CellRun[], a: VariantName, b: VariantName, scenario: ScenarioName) {
  const ratios: number[] = [];
  for (const top of runs) {
    if (top.variant !== a || top.scenario !== scenario) continue;
    const bottom = runs.find(
      (r) => r.variant === b && r.scenario === scenario && r.round === top.round,
    );
    if (bottom && bottom.rps > 0) ratios.push(top.rps / bottom.rps);
  }
  if (ratios.length === 0) return null;
  return { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) };
}

const fixed = (n: number, digits = 0) => n.toFixed(digits);
const ms = (n: number) => (n < 10 ? n.toFixed(2) : n.toFixed(1));

export function formatTable(summary: CellSummary[]): string {
  const header = [
    'variant',
    'scenario',
    'req/s',
    'min–max',
    'p50 ms',
    'p99 ms',
    'non-2xx',
    '×baseline',
    'node µs/req',
    'store µs/req',
    'check',
  ];
  const rows = summary.map((s) => [
    s.variant,
    s.scenario,
    fixed(s.rps),
    `${fixed(s.rpsMin)}–${fixed(s.rpsMax)}`,
    ms(s.p50),
    ms(s.p99),
    fixed(s.non2xx),
    s.vsBaseline === null ? '-' : fixed(s.vsBaseline, 2),
    s.serverUs === null ? '-' : fixed(s.serverUs),
    s.storeUs === null ? '-' : fixed(s.storeUs),
    s.failedRounds > 0 ? `FAIL ${s.failedRounds}/${s.rounds}` : 'ok',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const right = new Set([2, 3, 4, 5, 6, 7, 8, 9]);
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (right.has(i) ? c.padStart(widths[i]) : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  const out = [line(header), rule];
  let previous = '';
  for (const [i, r] of rows.entries()) {
    if (previous && summary[i].variant !== previous) out.push('');
    previous = summary[i].variant;
    out.push(line(r));
  }
  return out.join('\n');
}

export function formatRatios(ratios: Ratio[]): string {
  const measured = ratios.filter((r) => r.value !== null);
  if (measured.length === 0) return '  (none: no pair of the targets ran)';
  const width = Math.max(...measured.map((r) => r.label.length));
  return measured
    .map(({ label, value, perRound: p }) => {
      const round = p
        ? `   round by round: median ${fixed(p.median, 2)}, ${fixed(p.min, 2)}–${fixed(p.max, 2)}`
        : '';
      return `  ${label.padEnd(width)}  ${fixed(value as number, 2)}${round}`;
    })
    .join('\n');
}
