import { describe, expect, it } from '@jest/globals';
import { BadRequestException, HttpException } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { IDEMPOTENCY_DEFAULTS } from '../../lib/idempotency.defaults.js';
import { resolveIdempotencyOptions } from '../../lib/idempotency-options.resolve.js';
import { InMemoryIdempotencyStore } from '../../lib/testing/index.js';

const dataSource = { options: { type: 'postgres' } } as unknown as DataSource;

describe('resolveIdempotencyOptions', () => {
  it('fills every default from one place', () => {
    const o = resolveIdempotencyOptions({ dataSource });
    expect(o.ttlSeconds).toBe(86_400);
    expect(o.headerName).toBe('idempotency-key');
    expect(o.leaseSeconds).toBe(IDEMPOTENCY_DEFAULTS.leaseSeconds);
    expect(o.cleanup).toEqual(IDEMPOTENCY_DEFAULTS.cleanup);
    expect(o.getUserId({ user: { id: 42 } })).toBe(42);
    expect(o.encryption).toBeNull();
  });

  it('needs a pool, a dataSource or a store, and a store alone is enough', () => {
    expect(() => resolveIdempotencyOptions({})).toThrow(
      'the `pool` option (your pg.Pool) or the `dataSource` option (a TypeORM DataSource) is required, or a `store` in place of the PostgreSQL one',
    );
    const store = new InMemoryIdempotencyStore();
    const o = resolveIdempotencyOptions({ store });
    expect(o.store).toBe(store);
    expect(o.dataSource).toBeUndefined();
    expect(resolveIdempotencyOptions({ dataSource }).store).toBeNull();
  });

  it('takes exactly one of pool, dataSource and store, naming the ones given', () => {
    const pool = { connect: async () => ({}) as never, query: async () => ({}) as never };
    expect(resolveIdempotencyOptions({ pool }).pool).toBe(pool);
    expect(() => resolveIdempotencyOptions({ pool, dataSource })).toThrow(
      'give exactly one of the options `pool`, `dataSource` and `store`, got `pool` and `dataSource`',
    );
    expect(() =>
      resolveIdempotencyOptions({ dataSource, store: new InMemoryIdempotencyStore() }),
    ).toThrow('got `dataSource` and `store`');
  });

  it("getRpcUserId: no user by default (the shared scope), the app's function when given", () => {
    expect(resolveIdempotencyOptions({ dataSource }).getRpcUserId({ tenant: 't1' }, {})).toBe(
      undefined,
    );
    const o = resolveIdempotencyOptions({ dataSource, getRpcUserId: (data) => data.tenant });
    expect(o.getRpcUserId({ tenant: 't1' }, {})).toBe('t1');
  });

  it('merges nested cleanup options over the defaults', () => {
    const o = resolveIdempotencyOptions({ dataSource, cleanup: { batchSize: 10 } });
    expect(o.cleanup).toEqual({ ...IDEMPOTENCY_DEFAULTS.cleanup, batchSize: 10 });
  });

  it('never allows Set-Cookie into the replayed headers', () => {
    const o = resolveIdempotencyOptions({ dataSource, replayHeaders: ['Location', 'Set-Cookie'] });
    expect([...o.replayHeaders]).toEqual(['location']);
  });

  it.each([
    [{ ttlSeconds: 0 }, /ttlSeconds/],
    [{ leaseSeconds: -1 }, /leaseSeconds/],
    [{ tableName: 'keys; DROP TABLE users' }, /tableName/],
    [{ cleanup: { batchSize: 0 } }, /batchSize/],
    [{ encryption: { keys: { a: Buffer.alloc(16) }, activeKeyId: 'a' } }, /exactly 32 bytes/],
    [{ encryption: { keys: { a: Buffer.alloc(32) }, activeKeyId: 'b' } }, /activeKeyId "b"/],
  ])('refuses settings that cannot work: %j', (bad, message) => {
    expect(() => resolveIdempotencyOptions({ dataSource, ...bad })).toThrow(message);
  });

  it.each([
    [{ ttlSeconds: '3600' }, 'ttlSeconds must be a positive number, got string "3600"'],
    [{ leaseSeconds: -1 }, 'leaseSeconds must be a positive number, got -1'],
    [{ statementTimeoutMs: Number.NaN }, 'statementTimeoutMs must be a positive number, got NaN'],
    [{ replayAuditMaxBuffered: 0 }, 'replayAuditMaxBuffered must be a positive number, got 0'],
    [{ maxResponseBytes: true }, 'maxResponseBytes must be a positive number, got boolean true'],
    [
      { cleanup: { retentionSeconds: -5 } },
      'cleanup.retentionSeconds must be a non-negative number, got -5',
    ],
    [
      { retryAfterSeconds: 1.5 },
      'retryAfterSeconds must be a whole number of seconds, at least 1 (it is sent in Retry-After), got 1.5',
    ],
    [
      { retryAfterSeconds: 0 },
      'retryAfterSeconds must be a whole number of seconds, at least 1 (it is sent in Retry-After), got 0',
    ],
  ])('names the option, the value and its type: %j', (bad, message) => {
    expect(() => resolveIdempotencyOptions({ dataSource, ...(bad as object) })).toThrow(
      `nestjs-pg-idempotency: ${message}`,
    );
  });

  it.each([
    [
      'every minute',
      /cleanup\.cron must be a cron expression .*, got string "every minute": Unknown alias/,
    ],
    [
      '61 * * * *',
      /cleanup\.cron .* got string "61 \* \* \* \*": Field value \(61\) is out of range/,
    ],
    [42, /cleanup\.cron .* got 42/],
  ])('refuses a bad cleanup.cron at start-up, not at the first tick: %j', (cron, message) => {
    expect(() =>
      resolveIdempotencyOptions({ dataSource, cleanup: { cron: cron as string } }),
    ).toThrow(message);
  });

  it('accepts five- and six-field cron expressions and a zero retention', () => {
    for (const cron of ['0 3 * * *', '*/30 * * * * *']) {
      expect(resolveIdempotencyOptions({ dataSource, cleanup: { cron } }).cleanup.cron).toBe(cron);
    }
    expect(
      resolveIdempotencyOptions({ dataSource, cleanup: { retentionSeconds: 0 } }).cleanup
        .retentionSeconds,
    ).toBe(0);
    expect(resolveIdempotencyOptions({ dataSource }).statementTimeoutMs).toBe(5_000);
  });

  it('requires a dataSource', () => {
    expect(() => resolveIdempotencyOptions({} as never)).toThrow(/dataSource/);
  });

  it('decides on the status the client receives: business failures stored, server and validation errors released', () => {
    const storeIf = IDEMPOTENCY_DEFAULTS.storeIf;
    expect(storeIf(201, undefined)).toBe(true);
    expect(storeIf(402, new HttpException('declined', 402))).toBe(true);
    expect(storeIf(400, new BadRequestException())).toBe(false);
    expect(storeIf(422, new HttpException('invalid', 422))).toBe(false);
    expect(storeIf(503, new HttpException('down', 503))).toBe(false);
    // An unknown error an app's exception filter turned into a 402 is a business outcome.
    expect(storeIf(402, new Error('mapped by a custom filter'))).toBe(true);
    expect(storeIf(500, new Error('unknown'))).toBe(false);
  });
});
