import { describe, expect, it } from '@jest/globals';
import { retryingSerialization } from '../../lib/store/postgres/serialization-retry.js';

const refused = (code: string) => Object.assign(new Error(`refused ${code}`), { code });

describe('retryingSerialization', () => {
  it('sends again a statement refused with 40001 or 40P01, and answers what the next send did', async () => {
    const codes = ['40001', '40P01'];
    let sends = 0;
    const result = await retryingSerialization(async () => {
      sends++;
      const code = codes.shift();
      if (code) throw refused(code);
      return { rowCount: 1 };
    });
    expect(result).toEqual({ rowCount: 1 });
    expect(sends).toBe(3);
  });

  it.each([
    ['gives up after five sends, with the last refusal', '40001', 5],
    ['never sends again on any other error', '57P01', 1],
  ])('%s', async (_title, code, expectedSends) => {
    let sends = 0;
    const attempt = retryingSerialization(async () => {
      sends++;
      throw refused(code);
    });
    await expect(attempt).rejects.toThrow(`refused ${code}`);
    expect(sends).toBe(expectedSends);
  });
});
