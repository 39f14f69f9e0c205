/**
 * The raw-SQL floor: the design written by hand (`raw-interceptor.ts`) with plain pg, every
 * replay read from the database: what the library is measured against.
 */
import { serveBehindInterceptor } from './common.js';
import { RawIdempotencyInterceptor } from './raw-interceptor.js';

await serveBehindInterceptor('raw-sql', (pool) => new RawIdempotencyInterceptor(pool));
