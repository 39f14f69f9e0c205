import { describe, expect, it } from '@jest/globals';
import { StoreTimeoutError, type Pool } from '../../lib/store/postgres/pg-deadline.js';
import { SingleCommitSlots } from '../../lib/store/postgres/single-commit-slots.js';

const poolOf = (max?: number) => ({ options: { max } }) as unknown as Pool;

describe('SingleCommitSlots', () => {
  it("leaves one of the pool's connections free, and at least one slot", () => {
    expect(new SingleCommitSlots(() => poolOf(3), 100).capacity).toBe(2);
    expect(new SingleCommitSlots(() => poolOf(1), 100).capacity).toBe(1);
    expect(new SingleCommitSlots(() => poolOf(undefined), 100).capacity).toBe(9);
  });

  it('hands a freed slot to the longest waiter, and frees each slot once', async () => {
    const slots = new SingleCommitSlots(() => poolOf(3), 1_000);
    const [a, b] = [await slots.acquire(), await slots.acquire()];
    const order: string[] = [];
    const c = slots.acquire().then((free) => (order.push('c'), free));
    const d = slots.acquire().then((free) => (order.push('d'), free));
    a();
    a(); // a second call must not free another slot
    await c;
    expect(order).toEqual(['c']);
    b();
    await d;
    expect(order).toEqual(['c', 'd']);
  });

  it('fails a waiter after its bound with a store timeout, and forgets it', async () => {
    const slots = new SingleCommitSlots(() => poolOf(2), 50);
    const held = await slots.acquire();
    await expect(slots.acquire()).rejects.toBeInstanceOf(StoreTimeoutError);
    held();
    // The timed-out waiter took nothing: the freed slot is there for the next request.
    const next = await slots.acquire();
    next();
  });
});
