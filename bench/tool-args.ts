import { ALL_VARIANTS, type VariantName } from './config.js';
import type { KeyedScenario } from './keyed-load.js';

const SCENARIOS: readonly KeyedScenario[] = ['first', 'replay', 'nokey'];

/**
 * What every measuring tool of bench/ reads from its command line: `--name value` pairs, the
 * variants (`--variants a,b`, or `--variant a`) checked against the known ones, the scenario
 * (`--scenario first|replay|nokey`, first by default), the tool's numeric options (`numbers`:
 * name → default; finite and > 0, a warm-up may be 0) and its other options (`strings`). Any
 * other option, or `--name=value`, is refused: a misspelled one would otherwise run the defaults.
 */
export function toolArgs<N extends string>(
  defaultVariants: string,
  numbers: Record<N, number>,
  strings: readonly string[] = [],
) {
  const known = new Set(['variants', 'variant', 'scenario', ...Object.keys(numbers), ...strings]);
  const args = new Map<string, string>();
  for (let i = 2; i < process.argv.length; i += 2) {
    const flag = process.argv[i];
    const name = flag.replace(/^--/, '');
    if (!flag.startsWith('--') || !known.has(name)) {
      throw new Error(
        `Unknown option ${flag}; this tool takes ${[...known].map((k) => `--${k}`).join(', ')} (each followed by its value)`,
      );
    }
    const value = process.argv[i + 1];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    args.set(name, value);
  }
  const variants = (args.get('variants') ?? args.get('variant') ?? defaultVariants).split(
    ',',
  ) as VariantName[];
  for (const v of variants) if (!ALL_VARIANTS.includes(v)) throw new Error(`Unknown variant ${v}`);
  const scenario = (args.get('scenario') ?? 'first') as KeyedScenario;
  if (!SCENARIOS.includes(scenario)) throw new Error(`--scenario ${SCENARIOS.join('|')}`);
  const n = { ...numbers };
  for (const key of Object.keys(numbers) as N[]) {
    if (!args.has(key)) continue;
    const value = Number(args.get(key));
    const least = key === 'warmup' ? 0 : Number.MIN_VALUE;
    if (!Number.isFinite(value) || value < least) {
      throw new Error(`--${key} must be a number ${key === 'warmup' ? '≥ 0' : '> 0'}`);
    }
    n[key] = value;
  }
  return { args, variants, scenario, n };
}
