/** The interval `npm run bench:pair` prints: the geometric mean of its rounds' ratios and where 95% of resamples fall. */
import { describe, expect, it } from '@jest/globals';
import { cellMean, ratioInterval } from '../../bench/ratio-interval.js';

const ROUNDS = [0.73, 0.86, 0.91, 1.1, 0.88, 0.79, 0.95, 0.84, 0.9, 1.02, 0.81, 0.87];
const logMean = (values: number[]) => values.reduce((s, r) => s + Math.log(r), 0) / values.length;

describe('ratioInterval', () => {
  it('is the geometric mean, inside an interval that holds it', () => {
    const { mean, low, high } = ratioInterval([ROUNDS]);
    expect(mean).toBeCloseTo(Math.exp(logMean(ROUNDS)), 12);
    expect(low).toBeLessThan(mean);
    expect(high).toBeGreaterThan(mean);
  });

  it('covers 95% of the mean: as wide as ±1.96 standard errors of the mean log', () => {
    const logs = ROUNDS.map(Math.log);
    const m = logMean(ROUNDS);
    // The bootstrap's spread is the plug-in standard deviation over √n.
    const se = Math.sqrt(logs.reduce((s, v) => s + (v - m) ** 2, 0) / logs.length / logs.length);
    const { low, high } = ratioInterval([ROUNDS]);
    expect(Math.log(high / low) / (2 * 1.96 * se)).toBeGreaterThan(0.9);
    expect(Math.log(high / low) / (2 * 1.96 * se)).toBeLessThan(1.1);
  });

  it('gives b/a the mirror image of a/b, so both positions of a pair average fairly', () => {
    const ab = ratioInterval([ROUNDS]);
    const ba = ratioInterval([ROUNDS.map((r) => 1 / r)]);
    expect(ba.mean).toBeCloseTo(1 / ab.mean, 12);
    expect(ba.low).toBeCloseTo(1 / ab.high, 12);
    expect(ba.high).toBeCloseTo(1 / ab.low, 12);
  });

  it('weighs each cell the same, however many rounds it has', () => {
    const even = ratioInterval([
      [0.8, 0.8],
      [1.0, 1.0],
    ]);
    const uneven = ratioInterval([[0.8, 0.8, 0.8, 0.8, 0.8, 0.8], [1.0]]);
    expect(even.mean).toBeCloseTo(Math.sqrt(0.8), 12);
    expect(uneven.mean).toBeCloseTo(Math.sqrt(0.8), 12);
    // Within a cell every round agrees: nothing to resample, the interval is the point.
    expect(uneven.high - uneven.low).toBeLessThan(1e-12);
  });

  it('narrows as rounds repeat', () => {
    const once = ratioInterval([ROUNDS]);
    const four = ratioInterval([[...ROUNDS, ...ROUNDS, ...ROUNDS, ...ROUNDS]]);
    expect(four.high - four.low).toBeLessThan((once.high - once.low) * 0.7);
  });

  it('gives the same interval for the same rounds, and refuses none or a ratio that is not one', () => {
    expect(ratioInterval([ROUNDS])).toEqual(ratioInterval([ROUNDS]));
    expect(() => ratioInterval([[]])).toThrow('no rounds');
    expect(() => ratioInterval([[0.9, Infinity]])).toThrow('not finite');
    expect(() => ratioInterval([[0.9, 0]])).toThrow('not finite');
  });

  it('gives the mean alone, as the interval has it, without resampling (each half of a pair)', () => {
    const cells = [ROUNDS.slice(0, 3), ROUNDS.slice(3)];
    expect(cellMean(cells)).toBeCloseTo(ratioInterval(cells).mean, 12);
    expect(cellMean([[0.8, 0.8, 0.8, 0.8, 0.8, 0.8], [1.0]])).toBeCloseTo(Math.sqrt(0.8), 12);
    expect(() => cellMean([])).toThrow('no rounds');
    expect(() => cellMean([[0.9, -1]])).toThrow('not finite');
  });
});
