/**
 * A ruler between the floor and `store-direct`: `raw-sql`'s hand-written interceptor sending the
 * library's own statements (claim, completion, release from `buildStatements`) with plain
 * `pool.query`, none of the store's JavaScript (no statement deadlines, no parsers of its own, no
 * codec). Its distance to `raw-sql` is what the guarantees' SQL costs by itself (the lease and its
 * fencing token, the scope lock, the conflicting row read in the claim's round trip, the expiry by
 * the database's clock, the stored headers and the queryable JSON copy); `store-direct`'s distance
 * to it is the store's JavaScript.
 */
import { randomUUID } from 'node:crypto';
import {
  type CallHandler,
  ConflictException,
  type ExecutionContext,
  type NestInterceptor,
  UnprocessableEntityException,
} from '@nestjs/common';
import { catchError, from, mergeMap, type Observable, of } from 'rxjs';
import type pg from 'pg';
import { IDEMPOTENCY_DEFAULTS } from '../../lib/index.js';
import { buildStatements } from '../../lib/store/postgres/idempotency.sql.js';
import { scopeLockKey } from '../../lib/store/postgres/scope-lock.js';
import { serveBehindInterceptor } from './common.js';
import { rawScope } from './raw-interceptor.js';

const TABLE = 'idempotency_keys';
const { ttlSeconds, leaseSeconds } = IDEMPOTENCY_DEFAULTS;
const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' };
const { claim: CLAIM, complete: COMPLETE, release: RELEASE } = buildStatements(TABLE);

interface ClaimRow {
  id: string | null;
  claimed: boolean;
  status: string | null;
  same_request: boolean;
  response_raw: Buffer | null;
}

class RawStoreSqlInterceptor implements NestInterceptor {
  constructor(private readonly pool: pg.Pool) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const scope = rawScope(context);
    if (!scope) return next.handle();
    const { res, key, endpoint, hash } = scope;
    const token = randomUUID();
    const lock = scopeLockKey(TABLE, { key, endpoint, userId: '' });
    const values = [key, endpoint, '', hash, token, leaseSeconds, ttlSeconds, lock];
    return from(this.pool.query<ClaimRow>({ ...CLAIM, values })).pipe(
      mergeMap(({ rows: [row] }) => {
        if (row.claimed) return this.run(row.id as string, token, next);
        if (row.id !== null && !row.same_request)
          throw new UnprocessableEntityException('key reused with another request');
        if (row.status !== 'completed' || row.response_raw === null) {
          res.setHeader('Retry-After', '1');
          throw new ConflictException('request in progress');
        }
        res.setHeader('Idempotent-Replayed', 'true');
        return of(JSON.parse(row.response_raw.toString('utf8')));
      }),
    );
  }

  private run(id: string, token: string, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      mergeMap(async (body) => {
        // The route's status (every bench route is a POST answering 201).
        const text = JSON.stringify(body);
        const raw = Buffer.from(text);
        await this.pool.query({
          ...COMPLETE,
          values: [id, token, 201, JSON_HEADERS, raw, text, null, ttlSeconds, null, null],
        });
        return body;
      }),
      catchError(async (err) => {
        await this.pool.query({ ...RELEASE, values: [id, token] });
        throw err;
      }),
    );
  }
}

await serveBehindInterceptor('raw-store-sql', (pool) => new RawStoreSqlInterceptor(pool));
