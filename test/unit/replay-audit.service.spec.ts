import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { resolveIdempotencyOptions } from '../../lib/idempotency-options.resolve.js';
import { ReplayAuditService } from '../../lib/execution/replay-audit.service.js';
import { InMemoryIdempotencyStore } from '../../lib/testing/in-memory-idempotency.store.js';
import type { DataSource } from 'typeorm';

const EXPIRES = new Date('2030-01-01T00:00:00Z');

function audit(replayAuditMaxBuffered = 10_000) {
  const store = new InMemoryIdempotencyStore();
  const options = resolveIdempotencyOptions({
    dataSource: {} as DataSource,
    replayAuditMaxBuffered,
  });
  return { store, service: new ReplayAuditService(options, store) };
}

/** Fake timers move `Date.now()` and `performance.now()` together, as a steady clock does. */
const start = (iso: string) => jest.useFakeTimers({ now: new Date(iso) });
const advance = (ms: number) => jest.advanceTimersByTime(ms);

describe('ReplayAuditService', () => {
  afterEach(() => {
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  it('writes one row per record per flush, with the count and how long ago the first and last replay were', async () => {
    const { store, service } = audit();
    start('2026-12-03T10:00:00.000Z');
    service.record('a', EXPIRES);
    advance(500);
    service.record('b', EXPIRES);
    advance(400);
    service.record('a', EXPIRES);
    service.record('a', EXPIRES);
    expect(service.counts).toMatchObject({ pending: 4, pendingRecords: 2 });
    advance(100);
    const write = jest.spyOn(store, 'recordReplays');
    await service.flush();
    expect(write.mock.calls[0][0]).toEqual([
      { recordId: 'a', count: 3, firstReplayedMsAgo: 1000, replayedMsAgo: 100, expiresAt: EXPIRES },
      { recordId: 'b', count: 1, firstReplayedMsAgo: 500, replayedMsAgo: 500, expiresAt: EXPIRES },
    ]);
    // The store stamps them with its own clock (here the same as the app's).
    expect(store.replays.map((r) => [r.firstReplayedAt, r.replayedAt])).toEqual([
      [new Date('2026-12-03T10:00:00.000Z'), new Date('2026-12-03T10:00:00.900Z')],
      [new Date('2026-12-03T10:00:00.500Z'), new Date('2026-12-03T10:00:00.500Z')],
    ]);
    expect(service.counts).toMatchObject({ pending: 0, pendingRecords: 0 });
  });

  it('sends durations from the monotonic clock: a wall clock step changes no stamp', async () => {
    const { store, service } = audit();
    start('2026-12-03T10:00:00.000Z');
    service.record('a', EXPIRES);
    advance(300);
    jest.setSystemTime(Date.now() - 3_600_000);
    service.record('a', EXPIRES);
    const write = jest.spyOn(store, 'recordReplays');
    await service.flush();
    expect(write.mock.calls[0][0]).toEqual([
      { recordId: 'a', count: 2, firstReplayedMsAgo: 300, replayedMsAgo: 0, expiresAt: EXPIRES },
    ]);
  });

  it('never lets one row span UTC midnight, so the daily views stay exact', async () => {
    const { store, service } = audit();
    start('2026-12-03T23:59:59.900Z');
    service.record('a', EXPIRES);
    advance(200);
    service.record('a', EXPIRES);
    service.record('a', EXPIRES);
    await service.flush();
    expect(store.replays.map((r) => [r.count, r.firstReplayedAt.toISOString()])).toEqual([
      [1, '2026-12-03T23:59:59.900Z'],
      [2, '2026-12-04T00:00:00.100Z'],
    ]);
  });

  it('bounds the records waiting, not the replays: a record already counted is never dropped', async () => {
    const { store, service } = audit(2);
    service.record('a', EXPIRES);
    service.record('b', EXPIRES);
    service.record('c', EXPIRES);
    for (let i = 0; i < 100; i++) service.record('a', EXPIRES);
    expect(service.counts).toMatchObject({ pending: 102, pendingRecords: 2, dropped: 1 });
    await service.flush();
    expect(store.replays.map((r) => [r.recordId, r.count])).toEqual([
      ['a', 101],
      ['b', 1],
    ]);
  });

  it('writes early only once half the bound of records is waiting (never below 1 000)', () => {
    const { store, service } = audit();
    const write = jest.spyOn(store, 'recordReplays');
    for (let i = 0; i < 4_999; i++) service.record(`r${i}`, EXPIRES);
    expect(write).not.toHaveBeenCalled();
    service.record('r4999', EXPIRES);
    expect(write).toHaveBeenCalledTimes(1);
    expect(write.mock.calls[0][0]).toHaveLength(5_000);

    const small = audit(1_500);
    const early = jest.spyOn(small.store, 'recordReplays');
    for (let i = 0; i < 1_000; i++) small.service.record(`r${i}`, EXPIRES);
    expect(early).toHaveBeenCalledTimes(1);
  });
});
