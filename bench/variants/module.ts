/** This library with its default options: `IdempotencyModule.forRoot({ dataSource })` + `@Idempotent()`. */
import { serveDefaultVariant } from './default-variant.js';

await serveDefaultVariant('module', 'dataSource');
