import { CreateIdempotencyKeys1764680000000 } from "./1764680000000-CreateIdempotencyKeys.js";

export { CreateIdempotencyKeys1764680000000 };
export {
  IDEMPOTENCY_KEYS_UP,
  IDEMPOTENCY_KEYS_DOWN,
  idempotencyKeysSqlFile,
  idempotencyKeysUp,
} from "./idempotency-keys.sql.js";

/** Every migration of the library, in order: `migrations: [...idempotencyMigrations, ...yours]`. */
export const idempotencyMigrations = [CreateIdempotencyKeys1764680000000];
