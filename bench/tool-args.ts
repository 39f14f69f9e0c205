import { ALL_VARIANTS, type VariantName } from './config.js';
import type { KeyedScenario } from './keyed-load.js';

/**
 * What every measuring tool of bench/ reads from its command line: `--name value` pairs, the
 * variants (`--variants a,b`, or `--variant a`) checked against the known ones, and the scenario
 * (`--scenario first|replay|nokey`, first by default).
 */
export function toolArgs(defaultVariants: string) {
  const args = new Map<string, string>();
  for (let i = 2; i < process.argv.length; i += 2)
    args.set(process.argv[i].replace(/^--/, ''), process.argv[i + 1]);
  const variants = (args.get('variants') ?? args.get('variant') ?? defaultVariants).split(
    ',',
  ) as VariantName[];
  for (const v of variants) if (!ALL_VARIANTS.includes(v)) throw new Error(`Unknown variant ${v}`);
  const scenario = args.get('scenario') ?? 'first';
  if (scenario !== 'first' && scenario !== 'replay' && scenario !== 'nokey')
    throw new Error('--scenario first|replay|nokey');
  return { args, variants, scenario: scenario as KeyedScenario };
}
