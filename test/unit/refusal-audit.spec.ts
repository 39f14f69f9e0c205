import { afterEach, describe, expect, it, jest } from '@jest/globals';
import type { DataSource } from 'typeorm';
import { resolveIdempotencyOptions } from '../../lib/idempotency-options.resolve.js';
import { ReplayAuditService } from '../../lib/execution/replay-audit.service.js';
import { InMemoryIdempotencyStore } from '../../lib/testing/in-memory-idempotency.store.js';
import type { RefusalEvent } from '../../lib/interfaces/idempotency-store.interface.js';

const EXPIRES = new Date('2030-01-01T00:00:00Z');

class RefusalsStore extends InMemoryIdempotencyStore {
  readonly refusals: RefusalEvent[] = [];
  async recordRefusals(events: readonly RefusalEvent[]) {
    this.refusals.push(...events);
  }
}

describe('ReplayAuditService, refusals', () => {
  afterEach(() => {
    jest.restoreAllMocks();
  });

  it('counts refusals per record and kind apart from replays, and writes them to recordRefusals', async () => {
    const store = new RefusalsStore();
    const options = resolveIdempotencyOptions({ dataSource: {} as DataSource });
    const service = new ReplayAuditService(options, store);
    const now = jest.spyOn(performance, 'now').mockReturnValue(1_000);
    service.record('a', EXPIRES);
    service.record('a', EXPIRES, 'in_progress');
    now.mockReturnValue(2_000);
    service.record('a', EXPIRES, 'in_progress');
    service.record('a', EXPIRES, 'mismatch');
    service.record('', EXPIRES, 'in_progress');
    expect(service.counts).toMatchObject({ pending: 5, pendingRecords: 4 });
    now.mockReturnValue(2_500);
    await service.flush();
    expect(store.replays).toEqual([expect.objectContaining({ recordId: 'a', count: 1 })]);
    expect(store.refusals).toEqual([
      {
        recordId: 'a',
        kind: 'in_progress',
        count: 2,
        firstRefusedMsAgo: 1_500,
        refusedMsAgo: 500,
        expiresAt: EXPIRES,
      },
      expect.objectContaining({ recordId: 'a', kind: 'mismatch', count: 1 }),
      expect.objectContaining({ recordId: null, kind: 'in_progress', count: 1 }),
    ]);
  });
});
