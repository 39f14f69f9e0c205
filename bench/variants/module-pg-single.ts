/** `module-single` on a plain pg pool: `forRoot({ pool })`, the INSERT through `idem.manager` (a pg PoolClient). */
import { serveTransactionalVariant } from './transactional-variant.js';

await serveTransactionalVariant('module-pg-single', 'single', 'pool');
