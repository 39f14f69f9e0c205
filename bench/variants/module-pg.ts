/** This library with its default options on a plain pg pool: `IdempotencyModule.forRoot({ pool })` + `@Idempotent()`, no TypeORM. */
import { serveDefaultVariant } from './default-variant.js';

await serveDefaultVariant('module-pg', 'pool');
