/** This library with `@Idempotent({ transactional: 'single' })`, single-commit (see transactional-variant.ts). */
import { serveTransactionalVariant } from './transactional-variant.js';

await serveTransactionalVariant('module-single', 'single');
