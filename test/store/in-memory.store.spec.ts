import { idempotencyStoreContract, InMemoryIdempotencyStore } from '../../lib/testing/index.js';

idempotencyStoreContract(async () => {
  let now = Date.now();
  return {
    store: new InMemoryIdempotencyStore({ now: () => now }),
    advance: async (seconds) => {
      now += seconds * 1000;
    },
  };
});
