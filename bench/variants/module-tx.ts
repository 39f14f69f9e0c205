/** This library with `@Idempotent({ transactional: true })` (see transactional-variant.ts). */
import { serveTransactionalVariant } from './transactional-variant.js';

await serveTransactionalVariant('module-tx', true);
