/** Internal: not exported from the package. */

/** DI token of the options after defaults were merged in (see `resolveIdempotencyOptions`). */
export const IDEMPOTENCY_RESOLVED_OPTIONS = Symbol('IDEMPOTENCY_RESOLVED_OPTIONS');

/** Reflect-metadata key that `@Idempotent()` writes on handlers and controllers. */
export const IDEMPOTENT_METADATA = 'idempotency:options';

/** `@nestjs/microservices`' `PATTERN_METADATA`: the patterns a message or event handler declares. */
export const MICROSERVICE_PATTERN_METADATA = 'microservices:pattern';
