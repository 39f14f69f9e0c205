import { describe, expect, it } from '@jest/globals';
import type { DataSource } from 'typeorm';
import { resolveIdempotencyOptions } from '../../lib/idempotency-options.resolve.js';
import type { IdempotencyModuleOptions } from '../../lib/interfaces/idempotency-module-options.interface.js';

const dataSource = { options: { type: 'postgres' } } as unknown as DataSource;
const resolve = (extra: object) =>
  resolveIdempotencyOptions({ dataSource, ...extra } as IdempotencyModuleOptions);

describe('strict options', () => {
  it.each([
    [{ ttlSecond: 60 }, "unknown option 'ttlSecond' (did you mean 'ttlSeconds'?)"],
    [{ TTLSeconds: 60 }, "unknown option 'TTLSeconds' (did you mean 'ttlSeconds'?)"],
    [{ getUserID: () => 1 }, "unknown option 'getUserID' (did you mean 'getUserId'?)"],
    [{ mismatchstatus: 422 }, "unknown option 'mismatchstatus' (did you mean 'mismatchStatus'?)"],
    [
      { cleanup: { retention: 60 } },
      "unknown option 'cleanup.retention' (did you mean 'cleanup.retentionSeconds'?)",
    ],
    [
      { replayCache: { maxEntry: 5 } },
      "unknown option 'replayCache.maxEntry' (did you mean 'replayCache.maxEntries'?)",
    ],
    [
      { encryption: { key: {}, activeKeyId: 'a' } },
      "unknown option 'encryption.key' (did you mean 'encryption.keys'?)",
    ],
  ])('rejects an unknown key, naming it and the closest valid one: %j', (bad, message) => {
    expect(() => resolve(bad)).toThrow(`nestjs-pg-idempotency: ${message}`);
  });

  it('lists the valid keys when nothing is close', () => {
    expect(() => resolve({ zzzzzzzzzzzz: 1 })).toThrow(/valid options: dataSource, store, /);
  });

  it('checks the keys before anything else, so a misspelt dataSource is named as such', () => {
    expect(() =>
      resolveIdempotencyOptions({ datasource: dataSource } as IdempotencyModuleOptions),
    ).toThrow("unknown option 'datasource' (did you mean 'dataSource'?)");
  });

  it.each([
    [{ mismatchStatus: 400 }, 'mismatchStatus must be one of 409, 422, got 400'],
    [{ mismatchStatus: '409' }, 'mismatchStatus must be one of 409, 422, got string "409"'],
    [{ replayAudit: 'sync' }, 'replayAudit must be one of "batched", "off", got string "sync"'],
    [{ getUserId: 'sub' }, 'getUserId must be a function, got string "sub"'],
    [{ storeIf: true }, 'storeIf must be a function, got boolean true'],
    [{ fingerprint: {} }, 'fingerprint must be a function, got object {}'],
    [{ getRpcKey: 'idempotencyKey' }, 'getRpcKey must be a function'],
    [{ headerName: '' }, 'headerName must be a non-empty string, got string ""'],
    [{ replayHeaders: 'location' }, 'replayHeaders must be an array of strings'],
    [{ replayHeaders: ['location', 7] }, 'replayHeaders must be an array of strings'],
    [{ cleanup: { enabled: 'yes' } }, 'cleanup.enabled must be true or false, got string "yes"'],
    [{ cleanup: false }, 'cleanup must be an object, got boolean false'],
    [{ replayCache: true }, 'replayCache must be false or an object, got boolean true'],
    [{ replayCache: { maxBytes: -1 } }, 'replayCache.maxBytes must be a non-negative number'],
    [{ store: 'postgres' }, 'store must be an object'],
  ])('rejects a value outside what the option takes: %j', (bad, message) => {
    expect(() => resolve(bad)).toThrow(`nestjs-pg-idempotency: ${message}`);
  });

  it('accepts every documented option, and undefined for any of them', () => {
    expect(() =>
      resolve({
        ttlSeconds: 60,
        getUserId: undefined,
        headerName: 'X-Key',
        mismatchStatus: 422,
        replayAudit: 'off',
        replayHeaders: ['location'],
        storeIf: () => true,
        fingerprint: (req: { body: unknown }) => req.body,
        getRpcKey: () => 'k',
        replayCache: false,
        cleanup: { enabled: false, cron: '0 3 * * *', batchSize: 10, retentionSeconds: 0 },
      }),
    ).not.toThrow();
    expect(() => resolve({ replayCache: { maxEntries: 0, ttlSeconds: 5 } })).not.toThrow();
  });

  it('keeps the default of a section field given as undefined, as for a top-level option', () => {
    const defaults = resolve({});
    const given = resolve({
      ttlSeconds: undefined,
      replayCache: { maxEntries: undefined, maxBytes: undefined, ttlSeconds: undefined },
      cleanup: { batchSize: undefined, retentionSeconds: undefined, cron: undefined },
    });
    expect(given.replayCache).toEqual(defaults.replayCache);
    expect(given.cleanup).toEqual(defaults.cleanup);
    expect(given.ttlSeconds).toBe(defaults.ttlSeconds);
  });
});
