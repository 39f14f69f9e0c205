/**
 * A ruler between the floor and the module: `raw-sql`'s hand-written interceptor, but every
 * statement is the library's store's (`PostgresIdempotencyStore.claim` / `complete` / `release`
 * on the bench's own pg pool, as `module-pg` gets it). What it adds to `raw-sql` is the store:
 * its SQL (the lease and its fencing token, the expiry by the database clock, the scope lock, the
 * conflicting row read in the claim's round trip, the queryable JSON copy) and its statements'
 * deadlines. What `module-pg` adds to it is the rest of the library (capture, fingerprint, cache,
 * audit, leases' heartbeat, shutdown). No replay cache: a replay is read by the claim.
 */
import {
  type CallHandler,
  ConflictException,
  type ExecutionContext,
  type NestInterceptor,
  UnprocessableEntityException,
} from '@nestjs/common';
import { catchError, from, mergeMap, type Observable, of } from 'rxjs';
import { IDEMPOTENCY_DEFAULTS, type Lease, PostgresIdempotencyStore } from '../../lib/index.js';
import { serveBehindInterceptor } from './common.js';
import { rawScope } from './raw-interceptor.js';

const { ttlSeconds, leaseSeconds } = IDEMPOTENCY_DEFAULTS;
const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' };

class StoreDirectInterceptor implements NestInterceptor {
  constructor(private readonly store: PostgresIdempotencyStore<unknown>) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const scope = rawScope(context);
    if (!scope) return next.handle();
    const { res, key, endpoint, hash } = scope;
    const claim = { key, endpoint, userId: '', requestHash: hash, ttlSeconds, leaseSeconds };
    return from(this.store.claim(claim)).pipe(
      mergeMap((outcome) => {
        if (outcome.type === 'claimed') return this.run(outcome.lease, next);
        if (outcome.type === 'mismatch')
          throw new UnprocessableEntityException('key reused with another request');
        if (outcome.type === 'in_progress') {
          res.setHeader('Retry-After', '1');
          throw new ConflictException('request in progress');
        }
        res.setHeader('Idempotent-Replayed', 'true');
        return of(JSON.parse(outcome.response.body?.toString('utf8') ?? 'null'));
      }),
    );
  }

  private run(lease: Lease, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      mergeMap(async (body) => {
        // The route's status (every bench route is a POST answering 201).
        const raw = Buffer.from(JSON.stringify(body));
        const completion = { statusCode: 201, headers: JSON_HEADERS, body: raw };
        await this.store.complete(lease, { ...completion, transactionId: null, ttlSeconds });
        return body;
      }),
      catchError(async (err) => {
        await this.store.release(lease);
        throw err;
      }),
    );
  }
}

await serveBehindInterceptor(
  'store-direct',
  (pool) => new StoreDirectInterceptor(new PostgresIdempotencyStore(pool, 'idempotency_keys')),
);
