/**
 * The geometric mean of per-round ratios and its 95% bootstrap interval over one run's rounds.
 * Rounds come in cells (for `bench:pair`: which half, and which variant's load started first);
 * each cell weighs the same in the mean, and the bootstrap resamples rounds within their cell, so
 * an uneven count per cell cannot lean the figure. Rounds are treated as independent: the
 * interval says nothing of what a restart of the servers or another run would add. Logs, because
 * log(b/a) = -log(a/b): the interval of b/a is the mirror image of a/b's.
 */
export interface RatioInterval {
  mean: number;
  low: number;
  high: number;
}

const meanOf = (values: readonly number[]) => values.reduce((s, v) => s + v, 0) / values.length;

function logCells(cells: readonly (readonly number[])[]): number[][] {
  const logs = cells.filter((cell) => cell.length > 0).map((cell) => cell.map(Math.log));
  if (logs.length === 0) throw new Error('ratioInterval: no rounds');
  for (const value of logs.flat()) {
    if (!Number.isFinite(value)) throw new Error('ratioInterval: a ratio is not finite and > 0');
  }
  return logs;
}

/** Each cell's mean of logs, then their mean: every cell weighs the same. */
const logMean = (logs: readonly (readonly number[])[]) => meanOf(logs.map(meanOf));

/** The geometric mean alone, each cell weighing the same: `ratioInterval(cells).mean`, no resampling. */
export function cellMean(cells: readonly (readonly number[])[]): number {
  return Math.exp(logMean(logCells(cells)));
}

/** 5 000 resamples with a fixed seed: the same rounds always give the same interval. */
export function ratioInterval(
  cells: readonly (readonly number[])[],
  resamples = 5000,
): RatioInterval {
  const logs = logCells(cells);
  let seed = 0x2545f491;
  // xorshift32: deterministic and good enough to pick rounds.
  const pick = (n: number) => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) % n;
  };
  const means: number[] = [];
  for (let i = 0; i < resamples; i++) {
    let sum = 0;
    for (const cell of logs) {
      let cellSum = 0;
      for (let j = 0; j < cell.length; j++) cellSum += cell[pick(cell.length)];
      sum += cellSum / cell.length;
    }
    means.push(sum / logs.length);
  }
  means.sort((x, y) => x - y);
  // Symmetric ranks, so the interval of b/a is the mirror of a/b's.
  const lowRank = Math.floor(0.025 * (means.length - 1));
  return {
    mean: Math.exp(logMean(logs)),
    low: Math.exp(means[lowRank]),
    high: Math.exp(means[means.length - 1 - lowRank]),
  };
}
