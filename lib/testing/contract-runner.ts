/**
 * The test runner's functions the contract uses. jest and vitest (`globals: true`) provide them as
 * globals; otherwise pass them, e.g. `import { describe, it, beforeEach, afterEach } from 'node:test'`.
 * Assertions are `node:assert`'s, so no runner's `expect` is needed.
 */
export interface StoreContractRunner {
  describe(name: string, fn: () => void): unknown;
  it(name: string, fn: () => Promise<void>): unknown;
  beforeEach(fn: () => Promise<void>): unknown;
  afterEach(fn: () => Promise<unknown>): unknown;
}
