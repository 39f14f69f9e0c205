/**
 * The single-commit floor: `transactional: 'single'` written by hand with plain pg. One pooled
 * connection per request: BEGIN, the scope's `pg_try_advisory_xact_lock` and the lookup in one
 * pipelined round trip; the handler's INSERT on that connection; the completed record and
 * COMMIT in one more. Three round trips and one commit, as the library's mode, but no deadline,
 * capture, cache, audit or fencing: what the design itself costs on this machine.
 */
import { createHash } from 'node:crypto';
import {
  type CallHandler,
  ConflictException,
  type ExecutionContext,
  Module,
  type NestInterceptor,
  UnprocessableEntityException,
  UseInterceptors,
} from '@nestjs/common';
import { from, type Observable } from 'rxjs';
import type pg from 'pg';
import { type BenchRequest, benchController, createPool, insertPayment, serve } from './common.js';
import { rawScope } from './raw-interceptor.js';

const TX = Symbol('raw-single transaction');
const LOCK = { name: 'raw_single_lock', text: 'SELECT pg_try_advisory_xact_lock($1) AS locked' };
const FIND = {
  name: 'raw_single_find',
  text: `SELECT request_hash, status_code, response_raw FROM idempotency_keys
 WHERE idempotency_key = $1 AND endpoint = $2 AND user_id = ''`,
};
const INSERT_COMPLETED = {
  name: 'raw_single_insert',
  text: `INSERT INTO idempotency_keys (idempotency_key, endpoint, request_hash, status, status_code,
       response_raw, completed_at) VALUES ($1, $2, $3, 'completed', 201, $4, now())`,
};

type PipelineClient = pg.PoolClient & { pipeline: boolean };

/** Sends `configs` back to back in one write and waits for every answer. */
async function pipelined(client: pg.PoolClient, configs: pg.QueryConfig[]) {
  const pipe = client as PipelineClient;
  pipe.pipeline = true;
  try {
    return await Promise.all(configs.map((config) => client.query(config)));
  } finally {
    pipe.pipeline = false;
  }
}

class RawSingleInterceptor implements NestInterceptor {
  constructor(private readonly pool: pg.Pool) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const scope = rawScope(context);
    if (!scope) return next.handle();
    const { req, res, key, endpoint, hash } = scope;
    return from(this.run(req, res, key, endpoint, hash, next));
  }

  private async run(
    req: Record<symbol, unknown>,
    res: { setHeader(name: string, value: string): void },
    key: string,
    endpoint: string,
    hash: string,
    next: CallHandler,
  ): Promise<unknown> {
    const client = await this.pool.connect();
    let done = false;
    try {
      const lockKey = createHash('sha256').update(`${key}\0${endpoint}`).digest().readBigInt64BE(0);
      const [, lock, found] = await pipelined(client, [
        { text: 'BEGIN' },
        { ...LOCK, values: [lockKey.toString()] },
        { ...FIND, values: [key, endpoint] },
      ]);
      const row = found.rows[0] as { request_hash: string; response_raw: Buffer } | undefined;
      if (!lock.rows[0].locked || row) {
        done = true;
        await client.query('ROLLBACK');
        if (!row) {
          res.setHeader('Retry-After', '1');
          throw new ConflictException('request in progress');
        }
        if (row.request_hash !== hash)
          throw new UnprocessableEntityException('key reused with another request');
        res.setHeader('Idempotent-Replayed', 'true');
        return JSON.parse(row.response_raw.toString('utf8'));
      }
      req[TX] = client;
      const body = await new Promise((resolve, reject) =>
        next.handle().subscribe({ next: resolve, error: reject }),
      );
      const raw = Buffer.from(JSON.stringify(body));
      await pipelined(client, [
        { ...INSERT_COMPLETED, values: [key, endpoint, hash, raw] },
        { text: 'COMMIT' },
      ]);
      done = true;
      return body;
    } finally {
      if (!done) await client.query('ROLLBACK').catch(() => undefined);
      client.release();
    }
  }
}

const pool = createPool();
const interceptor = new RawSingleInterceptor(pool);

function insert(req: BenchRequest, amount: number): Promise<string> {
  const tx = (req as unknown as Record<symbol, pg.PoolClient | undefined>)[TX];
  return insertPayment(tx ?? pool, req, amount, 'raw-single');
}

@Module({ controllers: [benchController(insert, () => UseInterceptors(interceptor))] })
class RawSingleModule {}

await serve(RawSingleModule, { afterClose: () => pool.end() });
