/**
 * The geometric mean of per-round ratios and its 95% bootstrap interval (5 000 resamples of the
 * rounds' logs, a fixed seed so the same rounds always give the same interval). A ratio's log is
 * symmetric around 1 (a/b and b/a are mirror images), so rounds run in both positions average
 * fairly, which a median of ratios and of inverted ratios does not.
 */
export interface RatioInterval {
  mean: number;
  low: number;
  high: number;
}

export function ratioInterval(ratios: readonly number[], resamples = 5000): RatioInterval {
  if (ratios.length === 0) throw new Error('ratioInterval: no rounds');
  const logs = ratios.map(Math.log);
  const meanOf = (values: readonly number[]) => values.reduce((s, v) => s + v, 0) / values.length;
  let seed = 0x2545f491;
  // xorshift32: deterministic and good enough to pick rounds.
  const pick = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) % logs.length;
  };
  const means: number[] = [];
  for (let i = 0; i < resamples; i++) {
    let sum = 0;
    for (let j = 0; j < logs.length; j++) sum += logs[pick()];
    means.push(sum / logs.length);
  }
  means.sort((x, y) => x - y);
  // Symmetric ranks, so the interval of b/a is the mirror of a/b's.
  const lowRank = Math.floor(0.025 * (means.length - 1));
  return {
    mean: Math.exp(meanOf(logs)),
    low: Math.exp(means[lowRank]),
    high: Math.exp(means[means.length - 1 - lowRank]),
  };
}
