// `nestjs-pg-idempotency/testing`: for the tests of apps that use the library.
export { InMemoryIdempotencyStore, type RecordedReplay } from './in-memory-idempotency.store.js';
export {
  idempotencyStoreContract,
  type StoreContractHarness,
} from './idempotency-store.contract.js';
