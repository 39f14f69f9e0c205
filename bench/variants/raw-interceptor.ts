/**
 * The hand-written interceptor of the raw floors: the same design written with plain pg and
 * named prepared statements. Claim with INSERT ... ON CONFLICT DO NOTHING, run the handler,
 * complete with one UPDATE; on conflict one SELECT decides between replay, 409 in progress and
 * 422 mismatch. No leases, heartbeats, header allow-lists or byte-exact capture. With a cache,
 * completed bodies are replayed from memory (unbounded, never expiring: a floor, not a design).
 */
import { createHash } from 'node:crypto';
import {
  type CallHandler,
  ConflictException,
  type ExecutionContext,
  type NestInterceptor,
  UnprocessableEntityException,
} from '@nestjs/common';
import { catchError, from, mergeMap, type Observable, of } from 'rxjs';
import type pg from 'pg';
import { KEY_HEADER } from './common.js';
import { CLAIM, COMPLETE, FIND, RELEASE } from './raw-statements.js';

interface Found {
  status: string;
  request_hash: string;
  status_code: number;
  response_raw: Buffer;
}

/** A completed response kept by `raw-cache`: the body as the handler returned it. */
export type RawReplayCache = Map<string, unknown>;

/** What both hand-written floors read off a request: its key, route and body hash. */
export function rawScope(context: ExecutionContext) {
  const http = context.switchToHttp();
  const req = http.getRequest();
  const key = req.headers[KEY_HEADER];
  if (typeof key !== 'string') return undefined;
  const endpoint = `${req.method} ${req.route.path}`;
  const hash = createHash('sha256')
    .update(JSON.stringify(req.body ?? null))
    .digest('hex');
  return { req, res: http.getResponse(), key, endpoint, hash };
}

export class RawIdempotencyInterceptor implements NestInterceptor {
  /** `cache`: completed bodies kept in memory and replayed without a round trip. */
  constructor(
    private readonly pool: pg.Pool,
    private readonly cache?: RawReplayCache,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const scope = rawScope(context);
    if (!scope) return next.handle();
    const { res, key, endpoint, hash } = scope;
    const cached = this.cache?.get(`${endpoint}\0${key}\0${hash}`);
    if (cached !== undefined) {
      res.setHeader('Idempotent-Replayed', 'true');
      return of(cached);
    }
    return from(this.pool.query({ ...CLAIM, values: [key, endpoint, hash] })).pipe(
      mergeMap(({ rows }) =>
        rows.length === 1
          ? this.run(rows[0].id, next, `${endpoint}\0${key}\0${hash}`)
          : from(this.replay(key, endpoint, hash, res)),
      ),
    );
  }

  private run(id: string, next: CallHandler, cacheKey: string): Observable<unknown> {
    return next.handle().pipe(
      mergeMap(async (body) => {
        // The route's status (every bench route is a POST answering 201).
        const raw = Buffer.from(JSON.stringify(body));
        await this.pool.query({ ...COMPLETE, values: [id, 201, raw] });
        this.cache?.set(cacheKey, body);
        return body;
      }),
      catchError(async (err) => {
        await this.pool.query({ ...RELEASE, values: [id] });
        throw err;
      }),
    );
  }

  private async replay(key: string, endpoint: string, hash: string, res: any): Promise<unknown> {
    const { rows } = await this.pool.query<Found>({ ...FIND, values: [key, endpoint] });
    const row = rows[0];
    if (row && row.request_hash !== hash)
      throw new UnprocessableEntityException('key reused with another request');
    if (!row || row.status !== 'completed') {
      res.setHeader('Retry-After', '1');
      throw new ConflictException('request in progress');
    }
    res.setHeader('Idempotent-Replayed', 'true');
    return JSON.parse(row.response_raw.toString('utf8'));
  }
}
