import { describe, expect, it } from '@jest/globals';
import { settledInput } from '../../lib/transports/value/settled-input.js';

describe('settledInput', () => {
  it('gives the same value back, synchronously, when it holds no Promise', () => {
    const args = { amount: 5, to: ['a', { b: 1 }] };
    expect(settledInput(args)).toBe(args);
  });

  it('awaits Promises at any depth and keeps other objects as they are', async () => {
    const at = new Date(0);
    const file = Promise.resolve({ filename: 'a.pdf', createReadStream: () => 'stream' });
    const settled = (await settledInput({ input: { files: [file], at }, title: 't' })) as {
      input: { files: { filename: string }[]; at: Date };
    };
    expect(settled.input.files[0].filename).toBe('a.pdf');
    expect(settled.input.at).toBe(at);
  });

  it('ends on a cycle instead of walking it', async () => {
    const args: Record<string, unknown> = { file: Promise.resolve('x') };
    args.self = args;
    const settled = (await settledInput(args)) as { file: string; self: unknown };
    expect(settled.file).toBe('x');
    expect(settled.self).toBe(args);
  });
});
