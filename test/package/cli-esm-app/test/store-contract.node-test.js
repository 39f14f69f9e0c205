// The store contract under node's own test runner: `node --test test/store-contract.node-test.js`.
import { afterEach, beforeEach, describe, it } from 'node:test';
import { idempotencyStoreContract, InMemoryIdempotencyStore } from 'nestjs-pg-idempotency/testing';

idempotencyStoreContract(
  async () => {
    let now = Date.now();
    return {
      store: new InMemoryIdempotencyStore({ now: () => now }),
      advance: async (seconds) => {
        now += seconds * 1000;
      },
    };
  },
  { describe, it, beforeEach, afterEach },
);
