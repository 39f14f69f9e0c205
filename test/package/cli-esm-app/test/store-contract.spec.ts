// The store contract under vitest, with the globals the CLI's vitest.config.ts turns on.
import { idempotencyStoreContract, InMemoryIdempotencyStore } from 'nestjs-pg-idempotency/testing';

idempotencyStoreContract(async () => {
  let now = Date.now();
  return {
    store: new InMemoryIdempotencyStore({ now: () => now }),
    advance: async (seconds) => {
      now += seconds * 1000;
    },
  };
});
