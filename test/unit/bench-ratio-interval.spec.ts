/** The interval `npm run bench:pair` prints: the geometric mean of its rounds' ratios and where 95% of resamples fall. */
import { describe, expect, it } from '@jest/globals';
import { ratioInterval } from '../../bench/ratio-interval.js';

const ROUNDS = [0.73, 0.86, 0.91, 1.1, 0.88, 0.79, 0.95, 0.84, 0.9, 1.02, 0.81, 0.87];

describe('ratioInterval', () => {
  it('is the geometric mean, inside an interval that holds it', () => {
    const { mean, low, high } = ratioInterval(ROUNDS);
    const logMean = ROUNDS.reduce((s, r) => s + Math.log(r), 0) / ROUNDS.length;
    expect(mean).toBeCloseTo(Math.exp(logMean), 12);
    expect(low).toBeLessThan(mean);
    expect(high).toBeGreaterThan(mean);
    expect(low).toBeGreaterThanOrEqual(Math.min(...ROUNDS));
    expect(high).toBeLessThanOrEqual(Math.max(...ROUNDS));
  });

  it('gives b/a the mirror image of a/b, so both positions of a pair average fairly', () => {
    const ab = ratioInterval(ROUNDS);
    const ba = ratioInterval(ROUNDS.map((r) => 1 / r));
    expect(ba.mean).toBeCloseTo(1 / ab.mean, 12);
    expect(ba.low).toBeCloseTo(1 / ab.high, 12);
    expect(ba.high).toBeCloseTo(1 / ab.low, 12);
  });

  it('narrows as rounds repeat, and is a point when every round agrees', () => {
    const once = ratioInterval(ROUNDS);
    const four = ratioInterval([...ROUNDS, ...ROUNDS, ...ROUNDS, ...ROUNDS]);
    expect(four.high - four.low).toBeLessThan((once.high - once.low) * 0.7);
    const agreed = ratioInterval([0.9, 0.9, 0.9]);
    for (const value of [agreed.mean, agreed.low, agreed.high]) expect(value).toBeCloseTo(0.9, 12);
  });

  it('gives the same interval for the same rounds, and refuses none', () => {
    expect(ratioInterval(ROUNDS)).toEqual(ratioInterval(ROUNDS));
    expect(() => ratioInterval([])).toThrow('no rounds');
  });
});
