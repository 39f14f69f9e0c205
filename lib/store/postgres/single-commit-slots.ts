import { type Pool, poolMax, StoreTimeoutError } from './pg-deadline.js';

/**
 * Caps the single-commit transactions open at once at the pool's size − 1. Each holds a pool
 * connection from its claim until it ends; a handler that also queries through the app's own
 * DataSource (an injected repository) needs another one meanwhile. Without the cap, as many
 * requests as the pool has connections would each hold one and wait forever for a second.
 * Requests past the cap wait for a slot, in order, at most `waitMs`, then fail (503).
 */
export class SingleCommitSlots {
  private open = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly pool: () => Pool | undefined,
    private readonly waitMs: number,
  ) {}

  /** How many may be open at once. */
  get capacity(): number {
    return Math.max(1, (poolMax(this.pool()) ?? 10) - 1);
  }

  /** Takes a slot (waiting for one); the returned function gives it back, once. */
  async acquire(): Promise<() => void> {
    if (this.open < this.capacity) {
      this.open++;
    } else {
      await new Promise<void>((resolve, reject) => {
        const granted = () => {
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          this.waiting.splice(this.waiting.indexOf(granted), 1);
          reject(new StoreTimeoutError(this.what(), this.waitMs));
        }, this.waitMs);
        this.waiting.push(granted);
      });
    }
    let given = false;
    return () => {
      if (given) return;
      given = true;
      // Handed straight to the next waiter: the count of open transactions stays the same.
      const next = this.waiting.shift();
      if (next) next();
      else this.open--;
    };
  }

  private what(): string {
    return `a single-commit slot (${this.open} transactions open, at most the pool's max − 1 = ${this.capacity})`;
  }
}
