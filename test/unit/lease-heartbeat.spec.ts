import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { LeaseHeartbeat } from '../../lib/execution/lease-heartbeat.js';
import type { IdempotencyStore } from '../../lib/interfaces/idempotency-store.interface.js';

const lease = { id: 'r1', token: 't1' };

function heartbeat(renew: () => Promise<boolean>, maxHoldSeconds = 300) {
  const calls: number[] = [];
  const store = {
    renew: async (_lease: unknown, seconds: number) => {
      calls.push(seconds);
      return renew();
    },
  } as unknown as IdempotencyStore;
  const warnings: string[] = [];
  const logger = { log() {}, error() {}, warn: (m: string) => void warnings.push(m) };
  const beat = new LeaseHeartbeat(
    store,
    lease,
    { leaseSeconds: 3, maxHoldSeconds },
    logger,
    () => 'key "k"',
  );
  return { beat, calls, warnings };
}

describe('LeaseHeartbeat', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('renews every third of the lease, for the whole lease length, until stopped', async () => {
    const { beat, calls } = heartbeat(async () => true);
    beat.start();
    await jest.advanceTimersByTimeAsync(999);
    expect(calls).toEqual([]);
    await jest.advanceTimersByTimeAsync(1);
    expect(calls).toEqual([3]);
    await jest.advanceTimersByTimeAsync(2_000);
    expect(calls).toEqual([3, 3, 3]);
    beat.stop();
    await jest.advanceTimersByTimeAsync(10_000);
    expect(calls).toHaveLength(3);
  });

  it('stops at maxHoldSeconds and says so', async () => {
    const { beat, calls, warnings } = heartbeat(async () => true, 2);
    beat.start();
    await jest.advanceTimersByTimeAsync(10_000);
    expect(calls).toEqual([3]);
    expect(warnings).toEqual([expect.stringContaining('maxHoldSeconds')]);
  });

  it('counts maxHoldSeconds on the monotonic clock: wall clock steps change nothing', async () => {
    const { beat, calls, warnings } = heartbeat(async () => true, 2);
    beat.start();
    jest.setSystemTime(Date.now() + 3_600_000);
    await jest.advanceTimersByTimeAsync(1_000);
    expect([calls, warnings]).toEqual([[3], []]);
    jest.setSystemTime(Date.now() - 7_200_000);
    await jest.advanceTimersByTimeAsync(10_000);
    expect(calls).toEqual([3]);
    expect(warnings).toEqual([expect.stringContaining('maxHoldSeconds')]);
  });

  it('stops when a renewal reports the lease lost', async () => {
    const { beat, calls } = heartbeat(async () => false);
    beat.start();
    await jest.advanceTimersByTimeAsync(10_000);
    expect(calls).toHaveLength(1);
  });

  it('keeps renewing after a failed renewal (the database may be back next time)', async () => {
    const { beat, calls, warnings } = heartbeat(async () => {
      throw new Error('timeout');
    });
    beat.start();
    await jest.advanceTimersByTimeAsync(3_000);
    beat.stop();
    expect(calls).toHaveLength(3);
    expect(warnings[0]).toContain('timeout');
  });

  it('halt() resolves only once the renewal in flight has been answered', async () => {
    let answer!: (held: boolean) => void;
    const { beat, calls } = heartbeat(() => new Promise<boolean>((r) => (answer = r)));
    beat.start();
    await jest.advanceTimersByTimeAsync(1_000);
    expect(calls).toHaveLength(1);
    let halted = false;
    const halting = beat.halt().then(() => (halted = true));
    await jest.advanceTimersByTimeAsync(5_000);
    expect(halted).toBe(false);
    expect(calls).toHaveLength(1);
    answer(true);
    await halting;
    expect(halted).toBe(true);
  });
});
