import { describe, expect, it } from '@jest/globals';
import { BadRequestException, HttpException } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { IDEMPOTENCY_DEFAULTS, resolveIdempotencyOptions } from '../../lib/idempotency.defaults.js';

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
