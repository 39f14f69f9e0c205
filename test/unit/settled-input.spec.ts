import { describe, expect, it } from '@jest/globals';
import { settledInput, UnsettledInputError } from '../../lib/transports/value/settled-input.js';
import { UnhashableValueError } from '../../lib/execution/request-fingerprint.js';

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

  it('has a handler on every Promise before any of them rejects (no unhandled rejection)', async () => {
    // A thenable tells when a handler is attached; it rejects 10 ms in, the other resolves at 50 ms.
    let onRejected: ((err: Error) => void) | undefined;
    let rejectedAt10ms = false;
    const back = {
      then(_onFulfilled: unknown, onR: (err: Error) => void) {
        onRejected = onR;
        if (rejectedAt10ms) onR(new Error('client disconnected'));
      },
    };
    setTimeout(() => {
      rejectedAt10ms = true;
      onRejected?.(new Error('client disconnected'));
    }, 10);
    const front = new Promise((resolve) => setTimeout(() => resolve('a'), 50));
    const handledBefore = new Promise<boolean>((resolve) =>
      setTimeout(() => resolve(onRejected !== undefined), 9),
    );
    await expect(settledInput({ front, back }) as Promise<unknown>).rejects.toThrow(
      'client disconnected',
    );
    expect(await handledBefore).toBe(true);
  });

  it('walks as deep an input as canonicalJson hashes, without the call stack', () => {
    const depth = 50_000;
    const payload = JSON.parse('{"a":'.repeat(depth) + '1' + '}'.repeat(depth)) as unknown;
    expect(settledInput(payload)).toBe(payload);
  });

  it('refuses, as unhashable, an input deeper than the stack beside a Promise', async () => {
    const depth = 50_000;
    const meta = JSON.parse('{"a":'.repeat(depth) + '1' + '}'.repeat(depth)) as unknown;
    const input = { file: Promise.resolve({ filename: 'a.txt' }), meta };
    await expect(settledInput(input) as Promise<unknown>).rejects.toThrow(UnhashableValueError);
  });

  it('refuses a Promise that does not settle in time instead of waiting for ever', async () => {
    const never = new Promise(() => undefined);
    await expect(settledInput({ files: [never] }, 50) as Promise<unknown>).rejects.toThrow(
      UnsettledInputError,
    );
  });
});
